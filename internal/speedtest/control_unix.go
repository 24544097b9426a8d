// SPDX-License-Identifier: Apache-2.0

//go:build darwin || linux

package speedtest

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// notSentLowat is the unsent backlog a load socket keeps at most
// (TCP_NOTSENT_LOWAT), so an upload's socket does not buffer seconds of
// data the link has not carried yet.
const notSentLowat = 128 << 10

// loadSocketControl asks for CUBIC where the system lets a socket choose
// (preferCubic) and a small unsent backlog.
func loadSocketControl(network, address string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	return c.Control(func(fd uintptr) {
		preferCubic(int(fd))
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, notSentLowat)
	})
}
