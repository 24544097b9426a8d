// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// compareObservations checks that reading ns over netlink gives the Live
// that reading it with ip and tc gives. Class rates are compared within
// the precision tc prints them with (iproute2 up to 6.1 prints classes as
// text, "30123Kbit"); everything else exactly.
func compareObservations(t *testing.T, ns, label string) {
	t.Helper()
	ctx := context.Background()
	tools := DefaultTools()
	tools.Netns = ns
	viaTC, err := Observe(ctx, execrun.Exec{}, tools)
	if err != nil {
		t.Fatalf("%s: observing with tc: %v", label, err)
	}
	viaNL, err := NewNetlink(ns).Observe(ctx, tools)
	if err != nil {
		t.Fatalf("%s: observing over netlink: %v", label, err)
	}
	for name, d := range viaTC.Devices {
		n := viaNL.Devices[name]
		if n == nil {
			t.Errorf("%s: %s is missing from the netlink reading", label, name)
			continue
		}
		if len(d.Classes) != len(n.Classes) {
			t.Errorf("%s: %s: %d classes with tc, %d over netlink", label, name, len(d.Classes), len(n.Classes))
			continue
		}
		for i := range d.Classes {
			c, nc := &d.Classes[i], &n.Classes[i]
			if !nc.Exact {
				t.Errorf("%s: %s class %s: netlink rates not exact", label, name, FormatHandle(nc.Handle))
			}
			for _, r := range [][2]int64{{c.RateBits, nc.RateBits}, {c.CeilBits, nc.CeilBits}} {
				if c.Exact && r[0] != r[1] || math.Abs(float64(r[0]-r[1])) > 0.001*float64(r[1]) {
					t.Errorf("%s: %s class %s: rate %d with tc, %d over netlink", label, name, FormatHandle(nc.Handle), r[0], r[1])
				}
			}
			c.RateBits, c.CeilBits, c.Exact = 0, 0, false
			nc.RateBits, nc.CeilBits, nc.Exact = 0, 0, false
		}
	}
	if !reflect.DeepEqual(viaTC.Devices, viaNL.Devices) {
		t.Errorf("%s: the readings differ\nwith tc:\n%s\nover netlink:\n%s", label, dumpLive(viaTC), dumpLive(viaNL))
	}
}

func dumpLive(l Live) string {
	var names []string
	for n := range l.Devices {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		d := l.Devices[n]
		fmt.Fprintf(&b, "%+v\n", d.Device)
		for _, q := range d.Qdiscs {
			fmt.Fprintf(&b, "  qdisc %+v", q)
			if q.Cake != nil {
				fmt.Fprintf(&b, " cake %+v", *q.Cake)
			}
			b.WriteString("\n")
		}
		for _, c := range d.Classes {
			fmt.Fprintf(&b, "  class %+v\n", c)
		}
		for _, f := range d.RootFilters {
			fmt.Fprintf(&b, "  root filter %+v\n", f)
		}
		for _, f := range d.IngressFilters {
			fmt.Fprintf(&b, "  ingress filter %+v\n", f)
		}
	}
	return b.String()
}

// The live state read over netlink is the one ip and tc read: macake's
// shapers in both directions with their IFB, redirect and probe
// exemptions (with every CAKE option away from its default, where there
// is CAKE); foreign qdiscs and filters beside them; the drift the drift
// check must see (what shapes deleted, a replaced root, a deleted IFB).
func TestKernelNetlinkObserveMatchesTC(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns := kernelNetns(t, "wan0", "lan0")
		b := ks.netlinkBackend(t, ns, execrun.Exec{})
		compareObservations(t, ns, "nothing shaped")

		wan := wanLink("wan0", 2)
		if ks.cake {
			wan.Cake = richCake()
		}
		desired := shape.State{Links: []shape.Link{wan}}
		apply(t, b, desired)
		compareObservations(t, ns, "shaped both ways")

		// Foreign objects: other kinds of qdisc on other devices, a filter of
		// someone else's on macake's ingress hook (kinds every kernel the
		// tests run on has).
		sh(t, "tc", "-n", ns, "qdisc", "add", "dev", "peer0", "root", "handle", "1:", "pfifo_fast")
		sh(t, "tc", "-n", ns, "qdisc", "add", "dev", "peer1", "root", "handle", "2:", "tbf", "rate", "1mbit", "burst", "32kb", "latency", "50ms")
		sh(t, "tc", "-n", ns, "qdisc", "add", "dev", "lan0", "root", "handle", "3:", "pfifo", "limit", "77")
		sh(t, "tc", "-n", ns, "filter", "add", "dev", "wan0", "ingress", "protocol", "ip", "pref", "5", "u32",
			"match", "ip", "dst", "10.1.2.3/32", "flowid", "ffff:5")
		compareObservations(t, ns, "with foreign objects")

		// Reading stats over netlink gives macake's shapers, as tc -s does.
		b.Netlink = NewNetlink(ns)
		viaNL, err := b.ShaperStats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b.Netlink = nil
		viaTC, err := b.ShaperStats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(viaNL) != 2 || len(viaTC) != 2 || viaNL[0].Name != viaTC[0].Name || viaNL[1].Name != viaTC[1].Name {
			t.Errorf("shaper stats: over netlink %+v, with tc %+v", viaNL, viaTC)
		}

		// Drift.
		deleteWhatShapes(t, ns, ks, "wan0")
		compareObservations(t, ns, "what shapes deleted")
		sh(t, "tc", "-n", ns, "qdisc", "replace", "dev", "wan0", "root", "handle", "9:", "tbf", "rate", "2mbit", "burst", "16kb", "latency", "20ms")
		compareObservations(t, ns, "root replaced")
		sh(t, "ip", "-n", ns, "link", "del", "ifb-macake2")
		compareObservations(t, ns, "IFB deleted")
	})
}
