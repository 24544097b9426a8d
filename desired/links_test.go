// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/sense/linkfacts"
)

// TestLinksReportText: the text names the network, every policy with its
// match keys and reason (the active one starred), and the interfaces left
// unshaped; interfaces nobody shapes stay out.
func TestLinksReportText(t *testing.T) {
	pol := settings.Policies{Dir: "/etc/macake/links.d", Links: []config.Link{
		link(t, "starlink", "interface = \"en0\"\ngateway_mac = \"74:24:9f:00:00:01\"\n"),
		link(t, "hotspot", "interface = \"en0\"\ngateway_ip = \"172.20.10.1\"\nssid = \"Phone\"\npriority = 3\n"),
		link(t, "usb", "interface = \"en8\"\n"),
	}}
	facts := linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{
		{Name: "en0", Up: true, GatewayMAC: mac(t, "74:24:9f:00:00:01"), GatewayIP: netip.MustParseAddr("192.168.1.1"), SSID: "STARLINK", Default: true},
		{Name: "en8"},
		{Name: "awdl0", Up: true},
	}}
	rep := NewLinksReport(pol, nil, facts, "detected")
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `Network now (detected):
  en0  up    gateway 192.168.1.1 (74:24:9f:00:00:01), SSID "STARLINK", default route
  en8  down

Policies in /etc/macake/links.d:
  * starlink  en0  autorate  gateway_mac=74:24:9f:00:00:01
      active: interface en0 is up and gateway_mac match
    hotspot   en0  autorate  gateway_ip=172.20.10.1 ssid="Phone" priority=3
      gateway_ip is 192.168.1.1, not 172.20.10.1
    usb       en8  autorate  (any network on the interface)
      interface en8 is down

Active: starlink on en0 (mode autorate).
No policy matches on en8: it is not shaped.
`
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	if len(rep.Policies) != 3 || rep.Policies[1].Match != (LinksMatchKeys{GatewayIP: "172.20.10.1", SSID: "Phone"}) || rep.Policies[0].Match.GatewayMAC != "74:24:9f:00:00:01" {
		t.Errorf("policies %+v", rep.Policies)
	}
}

// TestLinksReportEmptyListsAreJSONArrays: with nothing to list, the JSON
// says [] (none) rather than null, and the text says so in words.
func TestLinksReportEmptyListsAreJSONArrays(t *testing.T) {
	rep := NewLinksReport(settings.Policies{Dir: "d"}, nil, linkfacts.Facts{}, "MACAKE_LINK_FACTS=f.json")
	out, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"format_version":"2.0","config_dir":"d","facts_source":"MACAKE_LINK_FACTS=f.json","interfaces":[],"policies":[],"active":[],"errors":[]}`; got != want {
		t.Errorf("JSON %s\nwant %s", got, want)
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"no interface that a policy names, and no gateway", "none (no valid *.toml files)", "Active: none; nothing is shaped."} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
