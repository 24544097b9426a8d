// SPDX-License-Identifier: Apache-2.0

package pfcheck

import "time"

func timeNow() time.Time { return time.Unix(1_700_000_000, 0) }
