// SPDX-License-Identifier: Apache-2.0

//go:build unix

package state

import (
	"io/fs"
	"syscall"
)

// fileOwner returns the uid owning the file described by info.
func fileOwner(info fs.FileInfo) (uid int, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
