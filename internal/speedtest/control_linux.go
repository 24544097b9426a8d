// SPDX-License-Identifier: Apache-2.0

package speedtest

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// preferCubic asks for CUBIC congestion control (best effort: an
// unprivileged process may only pick from
// net.ipv4.tcp_allowed_congestion_control).
func preferCubic(fd int) {
	unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
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
