// SPDX-License-Identifier: Apache-2.0

//go:build darwin || linux

package statusapi

import (
	"errors"
	"net"
	"syscall"
)

// peerCred runs get on the descriptor of a unix socket connection.
func peerCred(c net.Conn, get func(fd int) (int, error)) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, errors.New("not a unix socket connection")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var uid int
	var gerr error
	if err := raw.Control(func(fd uintptr) { uid, gerr = get(int(fd)) }); err != nil {
		return 0, err
	}
	return uid, gerr
}
