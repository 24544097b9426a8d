// SPDX-License-Identifier: Apache-2.0

package terminal

import "golang.org/x/sys/unix"

// isTerminalFD reports whether fd is a terminal.
func isTerminalFD(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	return err == nil
}
