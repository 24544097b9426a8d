// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"net/netip"

	"github.com/macake/macake/config"
)

// Facts is what the machine knows about its network right now: one entry per
// interface. The sensing code detects it; MACAKE_LINK_FACTS=FILE replaces
// detection with this same JSON shape, for tests, demos and the emulator:
//
//	{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1",
//	  "gateway_mac":"74:24:9f:00:00:01","ssid":"STARLINK"}]}
type Facts struct {
	Interfaces []InterfaceFacts `json:"interfaces"`
}

// InterfaceFacts describes one interface. Zero values mean "unknown".
type InterfaceFacts struct {
	Name       string              `json:"name"`
	Up         bool                `json:"up"`
	GatewayIP  netip.Addr          `json:"gateway_ip,omitzero"`
	GatewayMAC config.HardwareAddr `json:"gateway_mac,omitzero"`
	SSID       string              `json:"ssid,omitempty"`
	// Default is true for the interface that carries the default route.
	Default bool `json:"default,omitempty"`
}

// Interface returns the facts for the named interface.
func (f Facts) Interface(name string) (InterfaceFacts, bool) {
	for _, i := range f.Interfaces {
		if i.Name == name {
			return i, true
		}
	}
	return InterfaceFacts{}, false
}
