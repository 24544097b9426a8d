// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"os"
	"os/user"
	"strconv"

	"github.com/macake/macake/internal/fileowner"
)

// Readers says who may ask the daemon behind the socket at path, for the
// message that tells everyone else to use sudo: "root", or "root and
// group NAME" when the socket belongs to a group (the operator group, or
// admin on macOS).
func Readers(path string) string {
	info, err := os.Stat(path)
	if err != nil {
		return "root"
	}
	_, gid, ok := fileowner.Of(info)
	if !ok || gid <= 0 || info.Mode().Perm()&0o060 != 0o060 {
		return "root"
	}
	name := strconv.Itoa(gid)
	if g, err := user.LookupGroupId(name); err == nil {
		name = g.Name
	}
	return "root and group " + name
}
