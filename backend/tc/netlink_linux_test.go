// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// A rate change over netlink starts no process and leaves the kernel
// exactly as `tc` would: tc's own detailed listing after a netlink change
// equals the listing after tc makes the same change, and the next plan is
// empty.
func TestKernelNetlinkSetRateMatchesTC(t *testing.T) {
	requireRoot(t)
	ns := newNetns(t)
	vethPair(t, ns, "wan0", "peer0")
	b := kernelBackend(t, ns, execrun.Exec{})
	wan := wanLink("wan0", 2)
	wan.Cake = &shape.Cake{Overhead: 18, MPU: 64}
	desired := shape.State{Links: []shape.Link{wan}}
	apply(t, b, desired)
	mustConverge(t, b, desired)

	nl := NewNetlink(ns)
	defer nl.Close()
	counting := &faultyRunner{inner: execrun.Exec{}}
	ctx := context.Background()
	show := func() string {
		return sh(t, "tc", "-n", ns, "-d", "class", "show", "dev", "wan0") + sh(t, "tc", "-n", ns, "-d", "qdisc", "show", "dev", "wan0") +
			sh(t, "tc", "-n", ns, "-d", "class", "show", "dev", "ifb-macake2") + sh(t, "tc", "-n", ns, "-d", "qdisc", "show", "dev", "ifb-macake2")
	}
	for _, rates := range [][2]int64{{41_234_567, 5_154_321}, {1_000_000_000, 8_000_000}, {40_000_000_000, 123_456}} {
		up := shape.Pipe{RateBits: rates[0], QueueBytes: 70_001}
		down := shape.Pipe{RateBits: rates[1], QueueBytes: 12_345}
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
		viaNetlink := show()
		// The same changes through tc, after a detour so they change something.
		b.Runner, b.Netlink = execrun.Exec{}, nil
		for _, p := range []shape.Pipe{{RateBits: 3_000_000, QueueBytes: 4_000}} {
			if err := b.SetRate(ctx, wan, shape.Upload, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.SetRate(ctx, wan, shape.Upload, up); err != nil {
			t.Fatalf("tc SetRate: %v", err)
		}
		if err := b.SetRate(ctx, wan, shape.Download, down); err != nil {
			t.Fatalf("tc SetRate: %v", err)
		}
		if viaTC := show(); viaTC != viaNetlink {
			t.Errorf("rates %v: the kernel after netlink differs from after tc:\nnetlink:\n%s\ntc:\n%s", rates, viaNetlink, viaTC)
		}
		wan.Upload, wan.Download = up, down
		mustConverge(t, b, shape.State{Links: []shape.Link{wan}})
	}
}

// A class deleted under the daemon makes the netlink change fail without
// creating anything; the next plan repairs it and the change works again.
func TestKernelNetlinkSetRateOnDeletedClass(t *testing.T) {
	requireRoot(t)
	ns := newNetns(t)
	vethPair(t, ns, "wan0", "peer0")
	b := kernelBackend(t, ns, execrun.Exec{})
	b.Netlink = NewNetlink(ns)
	defer b.Netlink.Close()
	wan := wanLink("wan0", 1)
	desired := shape.State{Links: []shape.Link{wan}}
	apply(t, b, desired)
	ctx := context.Background()
	if err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 7_000_000, QueueBytes: 9_000}); err != nil {
		t.Fatalf("SetRate: %v", err)
	}
	sh(t, "tc", "-n", ns, "class", "del", "dev", "wan0", "classid", "4d4b:1")
	err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 8_000_000, QueueBytes: 9_000})
	if err == nil {
		t.Fatal("SetRate on a deleted class succeeded")
	}
	t.Logf("error: %v", err)
	if out := sh(t, "tc", "-n", ns, "class", "show", "dev", "wan0"); strings.Contains(out, "4d4b:1") {
		t.Errorf("the failed change created a class:\n%s", out)
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
	// A vanished interface is a not-found error, as with tc.
	sh(t, "ip", "-n", ns, "link", "del", "wan0")
	if err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 9_000_000, QueueBytes: 9_000}); !IsNotFound(err) {
		t.Errorf("SetRate on a deleted interface = %v, want IsNotFound", err)
	}
}

// A netlink socket that dies under the writer (closed, as a kernel or a
// file-descriptor mix-up could) fails the change in hand and is replaced
// by a fresh one at the next: the following change works.
func TestKernelNetlinkSocketThatDiesIsReplaced(t *testing.T) {
	requireRoot(t)
	ns := newNetns(t)
	vethPair(t, ns, "wan0", "peer0")
	b := kernelBackend(t, ns, execrun.Exec{})
	b.Netlink = NewNetlink(ns)
	defer b.Netlink.Close()
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
	if out := sh(t, "tc", "-n", ns, "class", "show", "dev", "wan0"); !strings.Contains(out, "rate 9Mbit") {
		t.Errorf("the change on the new socket did not reach the kernel:\n%s", out)
	}
}
