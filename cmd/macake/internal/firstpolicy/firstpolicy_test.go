// SPDX-License-Identifier: Apache-2.0

package firstpolicy

import (
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/draft"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
)

func TestInterface(t *testing.T) {
	mac, _ := net.ParseMAC("74:24:9f:00:00:01")
	facts := linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{
		{Name: "en5", Up: true},
		{Name: "en0", Up: true, GatewayIP: netip.MustParseAddr("192.168.1.1"), GatewayMAC: config.HardwareAddr(mac), SSID: "home", Default: true},
	}}
	for _, tc := range []struct {
		facts       linkfacts.Facts
		iface, want string
		err         string
	}{
		{facts, "", "en0", ""},
		{facts, "en5", "en5", ""},
		{facts, "en9", "", "no interface en9 here (interfaces: en0, en5)"},
		{linkfacts.Facts{}, "en9", "", "(interfaces: none)"},
		{linkfacts.Facts{Interfaces: facts.Interfaces[:1]}, "", "", "no interface carries the default route"},
	} {
		f, err := Interface(tc.facts, tc.iface)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Interface(%q): %v, want the error %q", tc.iface, err, tc.err)
			}
			continue
		}
		if err != nil || f.Name != tc.want {
			t.Errorf("Interface(%q) = %s, %v; want %s", tc.iface, f.Name, err, tc.want)
		}
	}
	f, _ := Interface(facts, "")
	if got, want := Matches(f), `interface en0, gateway 74:24:9f:00:00:01, Wi-Fi "home"`; got != want {
		t.Errorf("Matches = %q, want %q", got, want)
	}
	if got, want := Matches(linkfacts.InterfaceFacts{Name: "en5", GatewayIP: netip.MustParseAddr("10.0.0.1")}), "interface en5, gateway 10.0.0.1"; got != want {
		t.Errorf("Matches without a MAC = %q, want %q", got, want)
	}
}

func TestSetMeasured(t *testing.T) {
	var rep measure.Report
	rep.Download.BitsPerSecond, rep.Upload.BitsPerSecond = 100e6, 20e6
	var d draft.Draft
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := SetMeasured(&d, &rep, when); err != nil {
		t.Fatal(err)
	}
	if d.Download != config.FromCapacity(100e6) || d.Upload != config.FromCapacity(20e6) || d.Measured == nil || d.Measured.Download != 100e6 || !d.Measured.When.Equal(when) {
		t.Errorf("draft %+v, measured %+v", d, d.Measured)
	}
	rep.Upload.BitsPerSecond = 0
	if err := SetMeasured(&draft.Draft{}, &rep, when); err == nil || !strings.Contains(err.Error(), "found no capacity") {
		t.Errorf("no upload capacity: %v", err)
	}
}

func TestNext(t *testing.T) {
	command := func(asRoot bool, args ...string) string {
		if asRoot {
			return "sudo macake " + strings.Join(args, " ")
		}
		return "macake " + strings.Join(args, " ")
	}
	commands := func(next [][2]string) []string {
		var out []string
		for _, c := range next {
			out = append(out, c[0])
		}
		return out
	}
	for _, tc := range []struct {
		d           draft.Draft
		installable bool
		want        []string
	}{
		{draft.Draft{Name: "home", Download: 100e6}, true, []string{"macake validate", "sudo macake plan", "sudo macake install-daemon"}},
		{draft.Draft{Name: "home"}, true, []string{"sudo macake measure --link home", "sudo macake plan", "sudo macake install-daemon"}},
		{draft.Draft{Name: "home", Download: 100e6}, false, []string{"macake validate", "sudo macake plan", "sudo macake apply"}},
	} {
		if got := commands(Next(command, tc.d, tc.installable)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Next(%+v, installable %v) = %q, want %q", tc.d, tc.installable, got, tc.want)
		}
	}
}
