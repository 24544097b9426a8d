// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"os/user"
	"strconv"
)

// SocketReaders says who may ask the daemon over its socket, for the
// message that tells everyone else to use sudo.
const SocketReaders = "root and the admin group"

// adminGID is the admin group's id on every macOS release, for when the
// group database cannot be read.
const adminGID = 80

// socketGroup is the group that may read the status socket: admin, the
// group of the Mac's administrators (who may run sudo anyway).
func socketGroup() (int, bool) {
	if g, err := user.LookupGroup("admin"); err == nil {
		if gid, err := strconv.Atoi(g.Gid); err == nil {
			return gid, true
		}
	}
	return adminGID, true
}
