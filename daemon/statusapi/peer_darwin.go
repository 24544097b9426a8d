// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerUID returns the user id of the process at the other end of a unix
// socket connection (LOCAL_PEERCRED: the credentials it connected with).
func peerUID(c net.Conn) (int, error) {
	return peerCred(c, func(fd int) (int, error) {
		x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if err != nil {
			return 0, err
		}
		return int(x.Uid), nil
	})
}
