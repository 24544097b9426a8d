// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"context"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/internal/netns"
)

// TestNetnsFactsAndChanges detects the gateway and its MAC inside a
// namespace with two routers, then moves the default route and takes a
// link down, and expects the watcher to notice each change from netlink
// events alone (polling is set to an hour).
func TestNetnsFactsAndChanges(t *testing.T) {
	up := netns.New(t, "facts").Uplinks("va", "vb")
	client, gwA, gwB := up.Client, up.Gateway4(0), up.Gateway4(1)
	client.Route("default", "via", gwA)
	macA, macB := up.Routers[0].HardwareAddr(netns.UplinkDev), up.Routers[1].HardwareAddr(netns.UplinkDev)

	sys, err := NewSystem(SystemOptions{Do: client.Do, ResolveGatewayMAC: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	f, err := sys.Facts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("facts: %s", Describe(f))
	def, ok := DefaultInterface(f)
	if !ok || def.Name != "va" || def.GatewayIP != ip(gwA) || !def.GatewayMAC.Equal(config.HardwareAddr(macA)) || !def.Up {
		t.Fatalf("default %+v; want va via %s (%v), up", def, gwA, macA)
	}
	if vb, _ := f.Interface("vb"); vb.GatewayIP.IsValid() || vb.Default || !vb.Up {
		t.Errorf("vb %+v: up, no gateway, not default", vb)
	}
	if _, ok := f.Interface("lo"); ok {
		t.Error("loopback listed")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ch := Watch(ctx, sys, WatchConfig{Poll: time.Hour, Debounce: 50 * time.Millisecond})
	if ev := <-ch; ev.Reason != "start" || ev.Err != nil {
		t.Fatalf("start %+v", ev)
	}
	waitFor := func(what string, ok func(Facts) bool) Facts {
		t.Helper()
		for {
			select {
			case ev := <-ch:
				if ev.Err != nil {
					t.Fatalf("%s: %v", what, ev.Err)
				}
				if ok(ev.Facts) {
					return ev.Facts
				}
			case <-ctx.Done():
				t.Fatalf("%s was not noticed", what)
			}
		}
	}

	client.Route("default", "via", gwB, "dev", "vb")
	f = waitFor("moving the default route", func(f Facts) bool {
		d, ok := DefaultInterface(f)
		return ok && d.Name == "vb" && len(d.GatewayMAC) > 0
	})
	if d, _ := DefaultInterface(f); d.GatewayIP != ip(gwB) || !d.GatewayMAC.Equal(config.HardwareAddr(macB)) {
		t.Errorf("after the route change: %+v, want vb via %s (%v)", d, gwB, macB)
	}

	client.IP("link", "set", "va", "down")
	waitFor("taking va down", func(f Facts) bool {
		va, ok := f.Interface("va")
		return ok && !va.Up
	})
}
