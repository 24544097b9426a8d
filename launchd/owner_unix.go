// SPDX-License-Identifier: Apache-2.0

//go:build unix

package launchd

import (
	"io/fs"
	"syscall"
)

// fileOwner returns the numeric owner of fi, or -1, -1 when unknown.
func fileOwner(fi fs.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}
