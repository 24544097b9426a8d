// SPDX-License-Identifier: Apache-2.0

package shape

import "strconv"

// FormatBytes renders a queue size: "1500 B", "256 KB", "1 MB".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MB"
	case n >= 1024 && n%1024 == 0:
		return strconv.FormatInt(n>>10, 10) + " KB"
	}
	return strconv.FormatInt(n, 10) + " B"
}
