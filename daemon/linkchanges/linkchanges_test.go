// SPDX-License-Identifier: Apache-2.0

package linkchanges

import (
	"net"
	"net/netip"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/sense/linkfacts"
)

// TestFactsChange: the reason a link change gives names what changed in
// the interface's facts, and the policy files when nothing did.
func TestFactsChange(t *testing.T) {
	mac := func(s string) config.HardwareAddr {
		m, err := net.ParseMAC(s)
		if err != nil {
			t.Fatal(err)
		}
		return config.HardwareAddr(m)
	}
	home := linkfacts.InterfaceFacts{Name: "en0", Up: true, GatewayIP: netip.MustParseAddr("192.168.1.1"), GatewayMAC: mac("74:24:9f:00:00:01"), SSID: "home"}
	hotel := linkfacts.InterfaceFacts{Name: "en0", Up: true, GatewayIP: netip.MustParseAddr("10.0.0.1"), GatewayMAC: mac("74:24:9f:00:00:02"), SSID: "hotel"}
	down := linkfacts.InterfaceFacts{Name: "en0"}
	facts := func(i ...linkfacts.InterfaceFacts) linkfacts.Facts { return linkfacts.Facts{Interfaces: i} }
	for _, tc := range []struct {
		name          string
		before, after linkfacts.Facts
		want          string
	}{
		{"nothing changed", facts(home), facts(home), "policy files changed"},
		{"another network", facts(home), facts(hotel),
			"gateway 74:24:9f:00:00:01 -> 74:24:9f:00:00:02, gateway ip 192.168.1.1 -> 10.0.0.1, ssid home -> hotel"},
		{"the interface went down", facts(home), facts(down),
			"en0 up -> down, gateway 74:24:9f:00:00:01 -> none, gateway ip 192.168.1.1 -> none, ssid home -> none"},
		{"the interface appeared", facts(), facts(home),
			"en0 down -> up, gateway none -> 74:24:9f:00:00:01, gateway ip none -> 192.168.1.1, ssid none -> home"},
	} {
		if got := factsChange("en0", tc.before, tc.after); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
