// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package launchd

import "io/fs"

// fileOwner returns -1, -1: this platform has no numeric owners.
func fileOwner(fs.FileInfo) (uid, gid int) { return -1, -1 }
