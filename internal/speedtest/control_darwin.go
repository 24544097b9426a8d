// SPDX-License-Identifier: Apache-2.0

package speedtest

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// loadSocketControl keeps an upload's unsent backlog small
// (TCP_NOTSENT_LOWAT). macOS uses CUBIC already and has no per-socket
// choice.
func loadSocketControl(network, address string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	return c.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, 128<<10)
	})
}

// Congestion returns the congestion control of a TCP connection; macOS
// does not say, and uses CUBIC.
func Congestion(c syscall.Conn) string { return "" }
