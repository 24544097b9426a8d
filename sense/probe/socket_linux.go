// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"net"

	"golang.org/x/sys/unix"
)

// On Linux an unprivileged ICMP ("ping") socket exists only when the
// caller's group is inside net.ipv4.ping_group_range (per network
// namespace; the default "1 0" admits nobody, root included). The kernel
// overwrites the echo identifier with the socket's local port and hands
// each socket only its own replies; it accepts echo requests only, so ICMP
// timestamps need a raw socket (CAP_NET_RAW).
const (
	datagramRewritesID  = true
	datagramTimestamps  = false
	datagramSupported   = true
	preferRawTimestamps = true
)

const datagramHint = `unprivileged ICMP sockets are disabled by net.ipv4.ping_group_range; allow them with: sudo sysctl -w net.ipv4.ping_group_range="0 2147483647" (or run as root)`

// bindToInterface makes socket fd send and receive only through ifi
// (SO_BINDTODEVICE): the route lookup of every probe is restricted to that
// device, and the kernel hands the socket only what arrives on it. Since
// Linux 5.7 an unprivileged socket may bind itself once.
func bindToInterface(fd int, _ bool, ifi *net.Interface) error {
	return unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, ifi.Name)
}

// prepareDatagram sets what an ICMP datagram socket needs before bind:
// nothing on Linux.
func prepareDatagram(int, bool) error { return nil }
