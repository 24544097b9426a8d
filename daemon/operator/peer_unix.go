// SPDX-License-Identifier: Apache-2.0

//go:build darwin || linux

package operator

import (
	"errors"
	"net"
	"syscall"
)

// peerCred runs get on the descriptor of a unix socket connection.
func peerCred(c net.Conn, get func(fd int) (Peer, error)) (Peer, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Peer{}, errors.New("not a unix socket connection")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var p Peer
	var gerr error
	if err := raw.Control(func(fd uintptr) { p, gerr = get(int(fd)) }); err != nil {
		return Peer{}, err
	}
	return p, gerr
}
