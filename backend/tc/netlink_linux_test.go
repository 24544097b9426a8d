// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// kernelState is everything the kernel says about the qdiscs and classes
// of ns (kind, handles, and each one's options exactly as the kernel
// dumps them, attribute by attribute, counters left out), one line each:
// two namespaces in the same state give the same string. It sees what tc
// does not print (CAKE's target, htb's buffers).
func kernelState(t *testing.T, ns string) string {
	t.Helper()
	c, err := NewNetlink(ns).dialRead()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var lines []string
	for _, req := range []struct {
		what string
		typ  netlink.HeaderType
	}{{"qdisc", unix.RTM_GETQDISC}, {"class", unix.RTM_GETTCLASS}} {
		links, err := dump(c, unix.RTM_GETLINK, make([]byte, sizeofIfinfomsg))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			d, err := decodeLink(l.Data)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := dump(c, req.typ, tcmsgFor(d.Index, 0))
			if err != nil {
				t.Fatalf("%s dump of %s: %v", req.what, d.Name, err)
			}
			for _, m := range msgs {
				tm, rest, err := parseTcmsg(m.Data)
				if err != nil || int(tm.ifindex) != d.Index {
					continue
				}
				a, err := decodeTcAttrs(rest)
				if err != nil {
					t.Fatal(err)
				}
				if req.what == "class" && a.kind == "cake" {
					continue // CAKE lists its active flows as classes
				}
				lines = append(lines, fmt.Sprintf("%s %s %s %s parent %s options %s", req.what, d.Name, a.kind,
					FormatHandle(tm.handle), FormatHandle(tm.parent), hex.EncodeToString(a.options)))
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// richCake is a [cake] table with every option away from its default.
func richCake() *shape.Cake {
	return &shape.Cake{Diffserv: "diffserv4", EgressIsolate: "dual-srchost", IngressIsolate: "dual-dsthost", NAT: true,
		ACKFilter: true, Wash: true, NoSplitGSO: true, RTT: 50 * time.Millisecond, MemLimit: 1 << 20, LinkLayer: "ptm",
		Overhead: 18, MPU: 64}
}

// A rate change over netlink starts no process and leaves the kernel
// exactly as `tc` would: the kernel's own dump of every qdisc and class
// after a netlink change equals the one after tc makes the same change
// (on CAKE with every option away from its default), and the next plan
// is empty.
func TestKernelNetlinkSetRateMatchesTC(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns, b := ks.onWan0(t, ks.backend)
		wan := wanLink("wan0", 2)
		wan.Cake = &shape.Cake{Overhead: 18, MPU: 64}
		if ks.cake {
			wan.Cake = richCake()
		}
		desired := shape.State{Links: []shape.Link{wan}}
		apply(t, b, desired)
		mustConverge(t, b, desired)

		nl := NewNetlink(ns)
		defer nl.Close()
		counting := &faultyRunner{inner: execrun.Exec{}}
		ctx := context.Background()
		// Before each change, someone changes by hand what a rate change
		// sets besides the rate (htb's burst; CAKE's rtt, and with it its
		// target): each change must set all of it again, as tc's does.
		byHand := func() {
			for _, dev := range []string{"wan0", "ifb-macake2"} {
				if ks.cake {
					sh(t, "tc", "-n", ns, "qdisc", "change", "dev", dev, "parent", "4d4b:2", "handle", "4d4c:", "cake", "rtt", "20ms")
				} else {
					sh(t, "tc", "-n", ns, "class", "change", "dev", dev, "parent", "4d4b:", "classid", "4d4b:1", "htb", "rate", "3mbit", "burst", "100k")
				}
			}
		}
		for _, rates := range [][2]int64{{41_234_567, 5_154_321}, {1_000_000_000, 8_000_000}, {40_000_000_000, 123_456}} {
			up := shape.Pipe{RateBits: rates[0], QueueBytes: 70_001}
			down := shape.Pipe{RateBits: rates[1], QueueBytes: 12_345}
			byHand()
			b.Runner, b.Netlink = counting, nl
			if err := b.SetRate(ctx, wan, shape.Upload, up); err != nil {
				t.Fatalf("netlink SetRate upload %d: %v", rates[0], err)
			}
			if err := b.SetRate(ctx, wan, shape.Download, down); err != nil {
				t.Fatalf("netlink SetRate download %d: %v", rates[1], err)
			}
			if n := counting.count(); n != 0 {
				t.Fatalf("netlink SetRate ran %d commands: %v", n, counting.calls)
			}
			viaNetlink := kernelState(t, ns)
			// The same changes through tc, after the same hand-made change.
			byHand()
			b.Runner, b.Netlink = execrun.Exec{}, nil
			if err := b.SetRate(ctx, wan, shape.Upload, up); err != nil {
				t.Fatalf("tc SetRate: %v", err)
			}
			if err := b.SetRate(ctx, wan, shape.Download, down); err != nil {
				t.Fatalf("tc SetRate: %v", err)
			}
			if viaTC := kernelState(t, ns); viaTC != viaNetlink {
				t.Errorf("rates %v: the kernel after netlink differs from after tc:\nnetlink:\n%s\ntc:\n%s", rates, viaNetlink, viaTC)
			}
			wan.Upload, wan.Download = up, down
			mustConverge(t, b, shape.State{Links: []shape.Link{wan}})
			assertShaper(t, b, ks, "wan0", up.RateBits, up.QueueBytes)
			assertShaper(t, b, ks, "ifb-macake2", down.RateBits, down.QueueBytes)
		}
	})
}

// deleteWhatShapes deletes what carries the rate under macake's root on
// dev (htb's class, CAKE's leaf), as someone might by hand.
func deleteWhatShapes(t *testing.T, ns string, ks kernelShape, dev string) {
	t.Helper()
	if ks.cake {
		sh(t, "tc", "-n", ns, "qdisc", "del", "dev", dev, "parent", "4d4b:2", "handle", "4d4c:")
		return
	}
	sh(t, "tc", "-n", ns, "class", "del", "dev", dev, "classid", "4d4b:1")
}

// What shapes, deleted under the daemon, makes the netlink change fail
// without creating anything; the next plan repairs it and the change
// works again.
func TestKernelNetlinkSetRateOnDeletedClass(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns, b := ks.onWan0(t, ks.netlinkBackend)
		wan := wanLink("wan0", 1)
		desired := shape.State{Links: []shape.Link{wan}}
		apply(t, b, desired)
		ctx := context.Background()
		if err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 7_000_000, QueueBytes: 9_000}); err != nil {
			t.Fatalf("SetRate: %v", err)
		}
		deleteWhatShapes(t, ns, ks, "wan0")
		before := kernelState(t, ns)
		err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 8_000_000, QueueBytes: 9_000})
		if err == nil {
			t.Fatal("SetRate on a deleted class succeeded")
		}
		t.Logf("error: %v", err)
		if after := kernelState(t, ns); after != before {
			t.Errorf("the failed change changed the kernel:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		wan.Upload = shape.Pipe{RateBits: 8_000_000, QueueBytes: 9_000}
		desired = shape.State{Links: []shape.Link{wan}}
		p := apply(t, b, desired)
		if p.Empty() {
			t.Fatal("the plan does not repair the deleted class")
		}
		mustConverge(t, b, desired)
		if err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 9_000_000, QueueBytes: 9_000}); err != nil {
			t.Fatalf("SetRate after the repair: %v", err)
		}
		assertShaper(t, b, ks, "wan0", 9_000_000, 9_000)
		// A vanished interface is a not-found error, as with tc.
		sh(t, "ip", "-n", ns, "link", "del", "wan0")
		if err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 9_000_000, QueueBytes: 9_000}); !IsNotFound(err) {
			t.Errorf("SetRate on a deleted interface = %v, want IsNotFound", err)
		}
	})
}

// A netlink socket that dies under the writer (closed, as a kernel or a
// file-descriptor mix-up could) fails the change in hand and is replaced
// by a fresh one at the next: the following change works.
func TestKernelNetlinkSocketThatDiesIsReplaced(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		_, b := ks.onWan0(t, ks.netlinkBackend)
		wan := wanLink("wan0", 1)
		apply(t, b, shape.State{Links: []shape.Link{wan}})
		ctx := context.Background()
		if err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 7_000_000, QueueBytes: 9_000}); err != nil {
			t.Fatalf("SetRate: %v", err)
		}
		b.Netlink.mu.Lock()
		b.Netlink.conn.Close() // the socket dies
		b.Netlink.mu.Unlock()
		err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 8_000_000, QueueBytes: 9_000})
		if err == nil {
			t.Fatal("SetRate on a dead socket succeeded")
		}
		t.Logf("error: %v", err)
		if err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 9_000_000, QueueBytes: 9_000}); err != nil {
			t.Fatalf("SetRate after the socket died: %v (the writer must open a new one)", err)
		}
		// The change on the new socket reached the kernel.
		assertShaper(t, b, ks, "wan0", 9_000_000, 9_000)
	})
}
