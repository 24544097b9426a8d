// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/macake/macake/shape"
)

// twentyLinks returns 20 links on eth0..eth19 and the live state in which
// all of them are already applied, built the way tc prints it back.
func twentyLinks() (shape.State, Live) {
	var s shape.State
	live := Live{Tools: goldenTools, Caps: htbCaps, Devices: map[string]*DeviceState{}}
	for i := 0; i < 20; i++ {
		l := shape.Link{Name: fmt.Sprintf("link%02d", i), Interface: fmt.Sprintf("eth%d", i), Slot: i,
			Upload:     shape.Pipe{RateBits: int64(10_000_000 + i*1_234_567), QueueBytes: 64 << 10},
			Download:   shape.Pipe{RateBits: int64(50_000_000 + i*7_654_321), QueueBytes: 256 << 10},
			Reflectors: []shape.Reflector{shape.ICMPReflector(netip.MustParseAddr("1.1.1.1")), {Kind: shape.ProbeTCP, Addr: netip.MustParseAddr("9.9.9.9"), Port: 443}, shape.ICMPReflector(netip.MustParseAddr("2606:4700::1111"))}}
		s.Links = append(s.Links, l)
		shaper := func(name string, p shape.Pipe) *DeviceState {
			return &DeviceState{Device: Device{Name: name, Kind: "ifb", Up: true},
				Qdiscs: []Qdisc{{Kind: "htb", Handle: RootHandle, Root: true, HTBDefault: 1},
					{Kind: "bfifo", Handle: LeafHandle, Parent: ClassHandle, Limit: p.QueueBytes}},
				Classes: []Class{{Kind: "htb", Handle: ClassHandle, Root: true, Leaf: LeafHandle,
					RateBits: quantiseRate(p.RateBits), CeilBits: quantiseRate(p.RateBits)}}}
		}
		up := shaper(l.Interface, l.Upload)
		up.Kind = "veth"
		up.Qdiscs = append(up.Qdiscs, Qdisc{Kind: "ingress", Handle: IngressHandle, Parent: 0xfffffff1})
		for _, r := range l.Reflectors {
			pref, proto := exemptPref(r.Addr)
			up.RootFilters = append(up.RootFilters, Filter{Protocol: proto, Pref: pref, Kind: "u32", FlowID: exemptFlowID(egressHook, false), Keys: exemptKeys(egressHook, r)})
			up.IngressFilters = append(up.IngressFilters, Filter{Protocol: proto, Pref: pref, Kind: "u32", FlowID: exemptFlowID(ingressHook, false), Keys: exemptKeys(ingressHook, r)})
		}
		up.IngressFilters = append(up.IngressFilters, Filter{Protocol: "all", Pref: RedirectPref, Kind: "u32", Keys: []U32Key{{}},
			Actions: []Action{{Kind: "mirred", Mirred: "redirect", Direction: "egress", ToDev: IFBName(i)}}})
		live.Devices[up.Name] = up
		live.Devices[IFBName(i)] = shaper(IFBName(i), l.Download)
	}
	return s, live
}

func TestTwentyLinksModelConverges(t *testing.T) {
	s, live := twentyLinks()
	if p := Diff(s, live); !p.Empty() || len(p.Warnings) != 0 {
		t.Fatalf("the benchmark's converged model is not converged:\n%s", formatPlan(p))
	}
	fresh := Live{Tools: goldenTools, Caps: htbCaps, Devices: map[string]*DeviceState{}}
	for _, l := range s.Links {
		fresh.Devices[l.Interface] = &DeviceState{Device: Device{Name: l.Interface, Up: true}}
	}
	if p := Diff(s, fresh); len(p.Ops) != 20*7 {
		t.Fatalf("20 fresh links planned %d ops, want 140", len(p.Ops))
	}
}

// BenchmarkDiff20Links is the drift check of a router with 20 shaped
// links: a converged system (the common case) and a fresh one.
func BenchmarkDiff20Links(b *testing.B) {
	s, live := twentyLinks()
	fresh := Live{Tools: goldenTools, Caps: htbCaps, Devices: map[string]*DeviceState{}}
	for _, l := range s.Links {
		fresh.Devices[l.Interface] = &DeviceState{Device: Device{Name: l.Interface, Up: true}}
	}
	b.Run("converged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if p := Diff(s, live); !p.Empty() {
				b.Fatal("not converged")
			}
		}
	})
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Diff(s, fresh)
		}
	})
}

// BenchmarkSetRate measures the controller's hot path up to the process
// boundary and reports how many commands each call runs (must be 1).
func BenchmarkSetRate(b *testing.B) {
	r := &replayRunner{okByDefault: true}
	bk := fakeBackend(r, htbCaps)
	l := testLink()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if err := bk.SetRate(ctx, l, shape.Download, shape.Pipe{RateBits: int64(50_000_000 + i%1000), QueueBytes: 100_000}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	per := float64(len(r.calls)) / float64(i)
	b.ReportMetric(per, "commands/op")
	if per != 1 {
		b.Fatalf("SetRate ran %.2f commands per call, want exactly 1", per)
	}
}
