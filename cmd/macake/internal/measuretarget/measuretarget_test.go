// SPDX-License-Identifier: Apache-2.0

package measuretarget

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/desired"
)

func TestResolveUsesThePolicyOrTheDefaultRoute(t *testing.T) {
	dir := t.TempDir()
	facts := filepath.Join(dir, "facts.json")
	os.WriteFile(facts, []byte(`{"interfaces":[
		{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","default":true},
		{"name":"en5","up":true,"gateway_ip":"10.0.0.1"},
		{"name":"en6","up":true},
		{"name":"en8","up":false,"gateway_ip":"10.8.0.1"}]}`), 0o644)
	links := filepath.Join(dir, "links.d")
	os.Mkdir(links, 0o755)
	configtest.Write(t, links, "home", configtest.Policy{Interface: "en0", GatewayMAC: "74:24:9f:00:00:01", Download: "150mbit", Upload: "15mbit", More: `[autorate]
reflectors        = ["192.0.2.1", "192.0.2.2", "192.0.2.3"]
active_reflectors = 2
probe_interval    = "100ms"
`}.TOML())
	policy := func(name, iface, mac string) {
		configtest.Write(t, links, name, configtest.Policy{Interface: iface, GatewayMAC: mac, Download: "900mbit", Upload: "40mbit"}.TOML())
	}
	policy("dock", "en5", "")
	policy("starlink", "en7", "")
	policy("bridge", "en6", "")
	policy("spare", "en8", "")
	policy("office", "en0", "00:11:22:33:44:55")
	policy("anyen0", "en0", "")

	o := Options{Getenv: func(k string) string { return map[string]string{"MACAKE_LINK_FACTS": facts}[k] }, ConfigDir: links, NotRoot: true}
	// No --link: the policy matching the default route's network.
	got, err := Resolve(t.Context(), o, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "home" || got.Interface != "en0" || got.ProbeInterval != 100*time.Millisecond || len(got.Reflectors) != 2 || got.ProfileKey() != "home@74:24:9f:00:00:01" {
		t.Errorf("matched target %+v (key %s)", got, got.ProfileKey())
	}
	// --link names the active policy: the same target, with the given
	// reflectors.
	got, err = Resolve(t.Context(), o, "home", config.ICMPReflectors([]netip.Addr{netip.MustParseAddr("198.51.100.1")}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "home" || got.Interface != "en0" || len(got.Reflectors) != 1 || got.ProfileKey() != "home@74:24:9f:00:00:01" || got.Note != "" {
		t.Errorf("--link home: %+v", got)
	}
	// A policy that matches but is outranked is measured, with a note,
	// under the key watch would use for it.
	got, err = Resolve(t.Context(), o, "anyen0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "anyen0" || got.Interface != "en0" || got.ProfileKey() != "anyen0@74:24:9f:00:00:01" || !strings.Contains(got.Note, "outranked by home") {
		t.Errorf("--link anyen0: %+v", got)
	}
	// A link beside the default route's is measured through itself: the
	// probes and the load are bound to its interface.
	got, err = Resolve(t.Context(), o, "dock", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "dock" || got.BoundInterface() != "en5" || got.ProfileKey() != "dock" || !strings.Contains(got.Note, "bound to en5") {
		t.Errorf("--link dock: %+v (key %s), want it bound to en5", got, got.ProfileKey())
	}
	if got, _ := Resolve(t.Context(), o, "home", nil); got.BoundInterface() != "" {
		t.Errorf("--link home is bound to %s; the default route's link follows the routing table", got.BoundInterface())
	}
	// --link of a policy whose interface no measurement can cross is
	// refused rather than measured under the wrong name.
	for _, tc := range []struct{ link, want string }{
		{"bridge", "its interface en6 has no gateway (no route leaves through it; en0 carries the default route)"},
		{"spare", "its interface en8 is down"},
		{"starlink", "its interface en7 does not exist on this machine now (interfaces: en0, en5, en6, en8)"},
		{"office", "the policy does not match the current network: gateway_mac is 74:24:9f:00:00:01, not 00:11:22:33:44:55"},
	} {
		if got, err := Resolve(t.Context(), o, tc.link, nil); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--link "+tc.link+": ") {
			t.Errorf("--link %s: %+v, %v; want the error %q", tc.link, got, err, tc.want)
		}
	}
	if _, err := Resolve(t.Context(), o, "nope", nil); err == nil || !strings.Contains(err.Error(), "no such policy") {
		t.Errorf("unknown link: %v", err)
	}
	// No matching policy: the default route's interface and the default
	// reflectors, with a note.
	o.ConfigDir = filepath.Join(dir, "empty")
	got, err = Resolve(t.Context(), o, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "" || got.Interface != "en0" || len(got.Reflectors) != 6 || got.Note == "" || got.ProfileKey() != "en0@74:24:9f:00:00:01" {
		t.Errorf("fallback %+v", got)
	}
	// No default route: an error the commands recognise, with the
	// reflectors still resolved (monitor probes them anyway).
	os.WriteFile(facts, []byte(`{"interfaces":[{"name":"en0","up":true}]}`), 0o644)
	given := config.ICMPReflectors([]netip.Addr{netip.MustParseAddr("127.0.0.1")})
	got, err = Resolve(t.Context(), o, "", given)
	if !errors.Is(err, desired.ErrNoDefaultRoute) || len(got.Reflectors) != 1 || got.Reflectors[0] != given[0] || got.ProbeInterval <= 0 || got.Interface != "" {
		t.Errorf("no default route: %+v, %v", got, err)
	}
	o.ConfigDir = links
	if _, err := Resolve(t.Context(), o, "home", nil); !errors.Is(err, desired.ErrNoDefaultRoute) {
		t.Errorf("--link without a default route: %v", err)
	}
}
