// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"net"

	"golang.org/x/sys/unix"
)

// On darwin any user may open an ICMP datagram socket. The kernel does not
// rewrite the echo identifier and delivers every ICMP reply on the host to
// every such socket (they live on the raw-IP list), so replies must be
// matched on source, identifier, sequence and the payload's nonce. Such a
// socket may also send 20-byte timestamp requests.
const (
	datagramRewritesID  = false
	datagramTimestamps  = true
	datagramSupported   = true
	preferRawTimestamps = false
)

const datagramHint = "unprivileged ICMP sockets failed to open"

// bindToInterface makes socket fd send and receive only through ifi:
// IP_BOUND_IF (IPv4) or IPV6_BOUND_IF (IPv6), which take the interface
// index. The kernel then routes every probe out of ifi with ifi's scoped
// routes, whatever the primary interface is, and delivers only what
// arrives on it.
func bindToInterface(fd int, v6 bool, ifi *net.Interface) error {
	if v6 {
		return unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_BOUND_IF, ifi.Index)
	}
	return unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BOUND_IF, ifi.Index)
}

// prepareDatagram sets what an ICMP datagram socket needs before bind: on
// darwin an IPv4 one is asked to strip the IP header from what it reads
// (IP_STRIPHDR), as icmp.ListenPacket does.
func prepareDatagram(fd int, v6 bool) error {
	if v6 {
		return nil
	}
	return unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_STRIPHDR, 1)
}
