// SPDX-License-Identifier: Apache-2.0

package config

import (
	"net"
	"net/netip"
)

// HardwareAddr is a MAC address that reads and writes itself as text
// ("74:24:9f:00:00:01"), in JSON and in TOML alike.
type HardwareAddr net.HardwareAddr

// String returns the colon-separated lower-case form, or "" when empty.
func (h HardwareAddr) String() string {
	if len(h) == 0 {
		return ""
	}
	return net.HardwareAddr(h).String()
}

// MarshalText implements encoding.TextMarshaler.
func (h HardwareAddr) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. It accepts the
// colon, dash and dot forms net.ParseMAC accepts, for 6-byte addresses.
func (h *HardwareAddr) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*h = nil
		return nil
	}
	mac, err := net.ParseMAC(string(b))
	if err != nil {
		return &net.AddrError{Err: "invalid MAC address (want e.g. 74:24:9f:00:00:01)", Addr: string(b)}
	}
	if len(mac) != 6 {
		return &net.AddrError{Err: "MAC address must have 6 bytes", Addr: string(b)}
	}
	*h = HardwareAddr(mac)
	return nil
}

// Equal reports whether h and o are the same address.
func (h HardwareAddr) Equal(o HardwareAddr) bool {
	return net.HardwareAddr(h).String() == net.HardwareAddr(o).String()
}

// DescribeGateway names a gateway for people from its addresses as text:
// "gateway 192.168.1.1 (74:24:9f:00:00:01)", without the MAC when it is
// not known, "" without an IP.
func DescribeGateway(ip, mac string) string {
	switch {
	case ip == "":
		return ""
	case mac == "":
		return "gateway " + ip
	}
	return "gateway " + ip + " (" + mac + ")"
}

// AddrText is ip as text, "" for the zero (unknown) address.
func AddrText(ip netip.Addr) string {
	if !ip.IsValid() {
		return ""
	}
	return ip.String()
}
