// SPDX-License-Identifier: Apache-2.0

package archtest

import "os"

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o644) }
