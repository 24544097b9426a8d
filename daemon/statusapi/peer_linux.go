// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerUID returns the user id of the process at the other end of a unix
// socket connection (SO_PEERCRED: the credentials it connected with).
func peerUID(c net.Conn) (int, error) {
	return peerCred(c, func(fd int) (int, error) {
		u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return 0, err
		}
		return int(u.Uid), nil
	})
}
