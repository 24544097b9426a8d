// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/sense/linkfacts"
)

func link(t *testing.T, name, match string) config.Link {
	t.Helper()
	l, _, err := config.Parse(name+".toml", []byte("[match]\n"+match), config.LoadOptions{Target: config.TargetLinux})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mac(t *testing.T, s string) config.HardwareAddr {
	t.Helper()
	var h config.HardwareAddr
	if err := h.UnmarshalText([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestMatch(t *testing.T) {
	links := []config.Link{
		link(t, "travel", "interface = \"en0\"\npriority = -10\n"),
		link(t, "starlink", "interface = \"en0\"\ngateway_mac = \"74:24:9f:00:00:01\"\n"),
		link(t, "hotspot", "interface = \"en0\"\ngateway_ip = \"172.20.10.1\"\nssid = \"Phone\"\n"),
		link(t, "hotspot-any", "interface = \"en0\"\ngateway_ip = \"172.20.10.1\"\n"),
		link(t, "office", "interface = \"en0\"\ngateway_ip = \"10.0.0.1\"\npriority = 5\n"),
		link(t, "dock-b", "interface = \"en7\"\n"),
		link(t, "dock-a", "interface = \"en7\"\n"),
		link(t, "usb", "interface = \"en8\"\n"),
	}
	starlinkMAC := mac(t, "74:24:9f:00:00:01")
	for _, tc := range []struct {
		name   string
		facts  linkfacts.Facts
		active string            // active link names, sorted
		why    map[string]string // link → part of its reason
	}{
		{
			name:   "nothing up",
			facts:  linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0"}}},
			active: "",
			why:    map[string]string{"travel": "interface en0 is down", "usb": "interface en8 not present"},
		},
		{
			name:   "unknown network falls back to the catch-all",
			facts:  linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true, GatewayMAC: mac(t, "00:11:22:33:44:55"), GatewayIP: netip.MustParseAddr("192.168.7.1")}}},
			active: "travel",
			why: map[string]string{
				"travel":   "active: interface en0 is up",
				"starlink": "gateway_mac is 00:11:22:33:44:55, not 74:24:9f:00:00:01",
				"office":   "gateway_ip is 192.168.7.1, not 10.0.0.1",
			},
		},
		{
			name:   "more match keys beat fewer at the same priority",
			facts:  linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true, GatewayMAC: starlinkMAC}}},
			active: "starlink",
			why:    map[string]string{"starlink": "active: interface en0 is up and gateway_mac match", "travel": "matches, but outranked by starlink (priority 0 > -10)"},
		},
		{
			name:   "specificity, then the SSID",
			facts:  linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true, GatewayIP: netip.MustParseAddr("172.20.10.1"), SSID: "Phone"}}},
			active: "hotspot",
			why:    map[string]string{"hotspot-any": "outranked by hotspot (2 match keys > 1)", "hotspot": "gateway_ip, ssid match"},
		},
		{
			name:   "hidden SSID does not match",
			facts:  linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true, GatewayIP: netip.MustParseAddr("172.20.10.1")}}},
			active: "hotspot-any",
			why:    map[string]string{"hotspot": "SSID on en0 is unknown"},
		},
		{
			name:   "priority beats specificity",
			facts:  linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true, GatewayIP: netip.MustParseAddr("10.0.0.1"), GatewayMAC: starlinkMAC}}},
			active: "office",
			why:    map[string]string{"starlink": "outranked by office (priority 5 > 0)"},
		},
		{
			name:   "name breaks the last tie, one link per interface",
			facts:  linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en7", Up: true}, {Name: "en8", Up: true}}},
			active: "dock-a,usb",
			why:    map[string]string{"dock-b": "outranked by dock-a (same priority and number of match keys; its name sorts first)", "starlink": "interface en0 not present"},
		},
		{
			name:   "unknown gateway",
			facts:  linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true}}},
			active: "travel",
			why:    map[string]string{"starlink": "gateway's MAC on en0 is unknown", "office": "en0 has no known gateway"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := Match(links, tc.facts)
			if got := strings.Join(names(sel.Active), ","); got != tc.active {
				t.Errorf("active %q, want %q", got, tc.active)
			}
			if len(sel.Verdicts) != len(links) {
				t.Fatalf("%d verdicts for %d links", len(sel.Verdicts), len(links))
			}
			for i, v := range sel.Verdicts {
				if v.Name != links[i].Name {
					t.Errorf("verdict %d is for %s, want %s", i, v.Name, links[i].Name)
				}
				isActive := strings.Contains(","+tc.active+",", ","+v.Name+",")
				if v.Active != isActive || v.Active && !v.Matches {
					t.Errorf("%s: active=%v matches=%v (%s)", v.Name, v.Active, v.Matches, v.Reason)
				}
				if part, ok := tc.why[v.Name]; ok && !strings.Contains(v.Reason, part) {
					t.Errorf("%s: reason %q, want it to contain %q", v.Name, v.Reason, part)
				}
			}
		})
	}
}

func TestMatchIgnoresLinkOrder(t *testing.T) {
	a := link(t, "a", "interface = \"en0\"\n")
	b := link(t, "b", "interface = \"en0\"\n")
	facts := linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true}}}
	for _, ls := range [][]config.Link{{a, b}, {b, a}} {
		if got := Match(ls, facts).Active; len(got) != 1 || got[0].Name != "a" {
			t.Errorf("order %s: active %v", names(ls), names(got))
		}
	}
}

// BenchmarkMatch measures choosing among the example policies.
func BenchmarkMatch(b *testing.B) {
	links, _, err := config.Load("../examples/links.d", config.LoadOptions{SkipOwnershipCheck: true})
	if err != nil {
		b.Fatal(err)
	}
	facts := linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true}}}
	b.ReportAllocs()
	for b.Loop() {
		Match(links, facts)
	}
}

func names(links []config.Link) []string {
	var out []string
	for _, l := range links {
		out = append(out, l.Name)
	}
	return out
}
