// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerOf reads LOCAL_PEERCRED: the user and up to 16 groups the peer
// connected with, its effective group first (xucred's cr_groups).
func peerOf(c net.Conn) (Peer, error) {
	return peerCred(c, func(fd int) (Peer, error) {
		x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if err != nil {
			return Peer{}, err
		}
		p := Peer{UID: int(x.Uid)}
		for _, g := range x.Groups[:min(int(x.Ngroups), len(x.Groups))] {
			p.GIDs = append(p.GIDs, int(g))
		}
		return p, nil
	})
}
