// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/doctor/report"
)

// TestReflectorsAreProbedThroughEachLinksInterface: with two links up,
// each link's reflectors are probed through its own interface, as its
// controller probes them, so reflectors that answer through the default
// route but not through the second link are reported silent for it.
func TestReflectorsAreProbedThroughEachLinksInterface(t *testing.T) {
	lte := strings.NewReplacer(`"en0"`, `"en5"`, `["192.0.2.1", "192.0.2.2"]`, `["192.0.2.3"]`, "active_reflectors = 2", "active_reflectors = 1").Replace(wanPolicy)
	m := newFakeMac(t, map[string]string{"wan": wanPolicy, "lte": lte})
	m.setFacts(`{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","default":true},{"name":"en5","up":true,"gateway_ip":"10.64.0.1"}]}`)
	m.pinger.silentVia = map[string]bool{"en5": true}
	i := slices.IndexFunc(Checks, func(c Check) bool { return c.ID == "net.reflectors" })
	if i < 0 {
		t.Fatal("no net.reflectors check")
	}
	r := Run(context.Background(), NewInspection(m.system()), Checks[i:i+1]).Results[0]
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	if got := m.pinger.askedVia; !slices.Equal(got["en0"], addrs("192.0.2.1", "192.0.2.2")) || !slices.Equal(got["en5"], addrs("192.0.2.3")) || len(got) != 2 {
		t.Errorf("probed %v; want wan's reflectors through en0 and lte's through en5", got)
	}
	if r.Status != report.Warning || !strings.Contains(r.Message, "1 of 3 reflectors do not answer: 192.0.2.3 via en5") ||
		!slices.Contains(r.Details, "192.0.2.1 via en0: 3/3 replies, median 12.3ms") {
		t.Errorf("net.reflectors: %v %q %q; want 192.0.2.3 silent through en5", r.Status, r.Message, r.Details)
	}
}

// TestReflectorsProbedAreWatchs: while watch runs, doctor probes the
// reflectors its controllers probe now (one was replaced for a spare),
// not the policy's first ones; without watch, the first ones, which
// watch starts with.
func TestReflectorsProbedAreWatchs(t *testing.T) {
	policy := strings.NewReplacer(`["192.0.2.1", "192.0.2.2"]`, `["192.0.2.1", "192.0.2.2", "192.0.2.3"]`).Replace(wanPolicy)
	i := slices.IndexFunc(Checks, func(c Check) bool { return c.ID == "net.reflectors" })
	for _, running := range []bool{false, true} {
		m := newFakeMac(t, map[string]string{"wan": policy})
		want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")}
		if running {
			m.watch.status = healthyDaemon()
			m.watch.status.Links[0].Controller = &statusapi.Controller{Reflectors: []statusapi.Reflector{{Address: "192.0.2.3"}, {Address: "192.0.2.1"}}}
			want = []netip.Addr{netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("192.0.2.1")}
		}
		Run(context.Background(), NewInspection(m.system()), Checks[i:i+1])
		if got := m.pinger.asked; !slices.Equal(got, want) {
			t.Errorf("watch running %v: probed %v, want %v", running, got, want)
		}
	}
}
