// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package probe

import (
	"fmt"
	"net"
)

// Elsewhere only raw sockets are attempted.
const (
	datagramRewritesID  = false
	datagramTimestamps  = false
	datagramSupported   = false
	preferRawTimestamps = false
)

const datagramHint = "unprivileged ICMP sockets are not supported on this OS"

// listenOn reports that probes cannot be bound to an interface here.
func listenOn(ifname string) func(network, address string) (net.PacketConn, error) {
	return func(string, string) (net.PacketConn, error) {
		return nil, fmt.Errorf("binding probes to interface %s is not supported on this OS", ifname)
	}
}

// boundTo names the interface a socket is bound to: never, here.
func boundTo(net.PacketConn) string { return "" }
