// SPDX-License-Identifier: Apache-2.0

package speedtest

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// loadSocketControl asks for CUBIC congestion control (best effort: an
// unprivileged process may only pick from
// net.ipv4.tcp_allowed_congestion_control) and a small unsent backlog
// (TCP_NOTSENT_LOWAT), so an upload's socket does not buffer seconds of
// data the link has not carried yet.
func loadSocketControl(network, address string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	return c.Control(func(fd uintptr) {
		unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, 128<<10)
	})
}

// Congestion returns the congestion control of a TCP connection ("" if
// unknown).
func Congestion(c syscall.Conn) string {
	rc, err := c.SyscallConn()
	if err != nil {
		return ""
	}
	var cc string
	rc.Control(func(fd uintptr) {
		cc, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	return cc
}
