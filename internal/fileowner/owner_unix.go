// SPDX-License-Identifier: Apache-2.0

//go:build unix

package fileowner

import (
	"io/fs"
	"syscall"
)

// Of returns the uid and gid owning the file described by info.
func Of(info fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1, false
	}
	return int(st.Uid), int(st.Gid), true
}
