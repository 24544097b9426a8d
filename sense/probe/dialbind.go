// SPDX-License-Identifier: Apache-2.0

//go:build linux || darwin

package probe

import (
	"fmt"
	"net"
	"strings"
	"syscall"
)

// BindControl returns a Control function for net.Dialer and
// net.ListenConfig that binds each socket to interface ifname, as the
// probes bound to a link are (SO_BINDTODEVICE on Linux, IP_BOUND_IF and
// IPV6_BOUND_IF on macOS): a measurement of a link that does not carry
// the default route sends its load through that link too, not through
// the primary interface.
func BindControl(ifname string) func(network, address string, c syscall.RawConn) error {
	return func(network, _ string, c syscall.RawConn) error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return fmt.Errorf("binding to interface %s: %w", ifname, err)
		}
		v6 := strings.HasSuffix(network, "6") || network == "ip6:ipv6-icmp"
		var serr error
		if err := c.Control(func(fd uintptr) { serr = bindToInterface(int(fd), v6, ifi) }); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("binding to interface %s: %w", ifname, serr)
		}
		return nil
	}
}
