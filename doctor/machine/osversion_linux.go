// SPDX-License-Identifier: Apache-2.0

package machine

import "golang.org/x/sys/unix"

// OSVersion describes Linux by its kernel release, e.g. "Linux 6.12.0".
func OSVersion() string {
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		return "Linux " + unix.ByteSliceToString(u.Release[:])
	}
	return "Linux"
}
