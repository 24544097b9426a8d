// SPDX-License-Identifier: Apache-2.0

package machine

import "golang.org/x/sys/unix"

// OSVersion describes macOS, e.g. "macOS 15.1", from the same sysctl
// sw_vers reads.
func OSVersion() string {
	if v, err := unix.Sysctl("kern.osproductversion"); err == nil && v != "" {
		return "macOS " + v
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		return "Darwin " + unix.ByteSliceToString(u.Release[:])
	}
	return "macOS"
}
