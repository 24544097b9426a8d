// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"os/user"
	"strconv"
)

// adminGID is the admin group's id on every macOS release, for when the
// group database cannot be read.
const adminGID = 80

// defaultSocketGroup is the group that may read the status socket when
// the daemon settings name no operator group: admin, the group of the
// Mac's administrators (who may run sudo anyway).
func defaultSocketGroup() (int, bool) {
	if g, err := user.LookupGroup("admin"); err == nil {
		if gid, err := strconv.Atoi(g.Gid); err == nil {
			return gid, true
		}
	}
	return adminGID, true
}
