// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/shape"
)

// TestTargetOfProbesAsThePolicyDoes: a policy's target is its active
// reflectors (at least one) at its interval; without a policy the
// defaults'; --reflector replaces either.
func TestTargetOfProbesAsThePolicyDoes(t *testing.T) {
	refl := func(addrs ...string) []config.Reflector {
		var out []config.Reflector
		for _, a := range addrs {
			out = append(out, config.Reflector{Reflector: shape.ICMPReflector(netip.MustParseAddr(a))})
		}
		return out
	}
	link := func(active int, interval time.Duration) *config.Link {
		l := &config.Link{Name: "home"}
		l.Autorate.Reflectors = refl("192.0.2.1", "192.0.2.2", "192.0.2.3")
		l.Autorate.ActiveReflectors = active
		l.Autorate.ProbeInterval = units.Duration(interval)
		return l
	}
	d := config.Defaults.Autorate
	for _, tc := range []struct {
		name       string
		link       *config.Link
		given      []config.Reflector
		wantLink   string
		want       []config.Reflector
		wantPeriod time.Duration
	}{
		{"the policy's active reflectors", link(2, 100*time.Millisecond), nil, "home", refl("192.0.2.1", "192.0.2.2"), 100 * time.Millisecond},
		{"at least one", link(0, 100*time.Millisecond), nil, "home", refl("192.0.2.1"), 100 * time.Millisecond},
		{"no more than it lists", link(9, 100*time.Millisecond), nil, "home", refl("192.0.2.1", "192.0.2.2", "192.0.2.3"), 100 * time.Millisecond},
		{"the default interval", link(1, 0), nil, "home", refl("192.0.2.1"), d.ProbeInterval.Std()},
		{"given reflectors replace the policy's", link(2, 100*time.Millisecond), refl("198.51.100.7"), "home", refl("198.51.100.7"), 100 * time.Millisecond},
		{"no policy: the defaults", nil, nil, "", d.Reflectors[:d.ActiveReflectors], d.ProbeInterval.Std()},
		{"no policy, given reflectors", nil, refl("198.51.100.7"), "", refl("198.51.100.7"), d.ProbeInterval.Std()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TargetOf(tc.link, tc.given)
			if got.Link != tc.wantLink || !slices.Equal(got.Reflectors, tc.want) || got.ProbeInterval != tc.wantPeriod {
				t.Errorf("TargetOf = link %q, reflectors %v every %v; want %q, %v every %v",
					got.Link, got.Reflectors, got.ProbeInterval, tc.wantLink, tc.want, tc.wantPeriod)
			}
		})
	}
}

// TestBenchTargetsAddTheServerAndEachExtraOnce: against a server, bench
// measures latency to the server's own address and to each --reflector
// not already among the targets.
func TestBenchTargetsAddTheServerAndEachExtraOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lc := speedtest.ListenConfig()
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go speedtest.Serve(ctx, ln)
	server := fmt.Sprintf("http://%s", ln.Addr())
	extra := []config.Reflector{{Reflector: shape.ICMPReflector(netip.MustParseAddr("127.0.0.1"))}, {Reflector: shape.ICMPReflector(netip.MustParseAddr("192.0.2.9"))}}
	ep, targets, err := BenchTargets(ctx, server, extra)
	if err != nil {
		t.Fatal(err)
	}
	if ep.Name == "" {
		t.Errorf("no endpoint name")
	}
	want := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.9")}
	if got := shape.ReflectorAddrs(targets); !slices.Equal(got, want) {
		t.Errorf("targets %v, want %v", got, want)
	}
}
