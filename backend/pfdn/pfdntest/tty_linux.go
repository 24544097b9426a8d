// SPDX-License-Identifier: Apache-2.0

package pfdntest

import "golang.org/x/sys/unix"

// isTerminal reports whether fd is a terminal (dnctl asks before a flush
// only then).
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}
