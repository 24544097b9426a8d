// SPDX-License-Identifier: Apache-2.0

package state

import "os"

// flockHolders cannot tell on macOS, which lists flock holders nowhere a
// program may read; callers fall back to whether the recorded pid runs.
func flockHolders(*os.File) ([]LockBlocker, bool) { return nil, false }
