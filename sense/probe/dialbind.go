// SPDX-License-Identifier: Apache-2.0

//go:build linux || darwin

package probe

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
)

// BindControl returns a Control function for net.Dialer and
// net.ListenConfig that binds each socket to interface ifname, as the
// probes bound to a link are (SO_BINDTODEVICE on Linux, IP_BOUND_IF and
// IPV6_BOUND_IF on macOS): a measurement of a link that does not carry
// the default route sends its load through that link too, not through
// the primary interface. It is the one binding of the TCP and UDP probes
// and of the ICMP sockets opened through the net package.
//
// The interface is looked up on first use and again only when binding
// to what was found fails (the interface went, or came back with another
// index): a lookup reads every interface (about 80 µs on Linux), as much
// as the connect() of a TCP probe, which binds one socket per probe.
func BindControl(ifname string) func(network, address string, c syscall.RawConn) error {
	var known atomic.Pointer[net.Interface]
	return func(network, _ string, c syscall.RawConn) error {
		v6 := strings.HasSuffix(network, "6") || network == "ip6:ipv6-icmp"
		if ifi := known.Load(); ifi != nil && bindConn(c, v6, ifi) == nil {
			return nil
		}
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return fmt.Errorf("binding to interface %s: %w", ifname, err)
		}
		if err := bindConn(c, v6, ifi); err != nil {
			return fmt.Errorf("binding to interface %s: %w", ifname, err)
		}
		known.Store(ifi)
		return nil
	}
}

// bindConn binds the socket behind c to ifi (bindToInterface, per OS).
func bindConn(c syscall.RawConn, v6 bool, ifi *net.Interface) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = bindToInterface(int(fd), v6, ifi) }); err != nil {
		return err
	}
	return serr
}
