// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// Apply from empty with many links is a handful of processes on the real
// kernel, not one per command, and converges.
func TestKernelBatchApplyFromEmptyIsFewProcesses(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		const links = 12
		devs := make([]string, links)
		for i := range devs {
			devs[i] = fmt.Sprintf("wan%d", i)
		}
		ns := kernelNetns(t, devs...)
		var desired shape.State
		for i, dev := range devs {
			l := wanLink(dev, i)
			l.Name = dev
			desired.Links = append(desired.Links, l)
		}
		b := ks.backend(t, ns, execrun.Exec{})
		ctx := context.Background()
		p, err := b.Plan(ctx, desired)
		if err != nil {
			t.Fatal(err)
		}
		commands := p.Commands()
		counting := &faultyRunner{inner: execrun.Exec{}}
		b.Runner = counting
		done := 0
		err = b.ExecuteBatch(ctx, p.Ops, func(_ int, err error) {
			if err == nil {
				done++
			}
		})
		if err != nil || done != len(p.Ops) {
			t.Fatalf("ExecuteBatch did %d of %d ops, %v", done, len(p.Ops), err)
		}
		// The IFBs in one ip batch, then every tc command in one tc batch,
		// whatever the number of links.
		if n := counting.count(); n > 2 {
			for _, c := range counting.calls {
				t.Logf("%s", strings.Join(c.Argv, " "))
			}
			t.Errorf("%d commands for %d links ran as %d processes, want 2", commands, links, n)
		}
		b.Runner = execrun.Exec{}
		mustConverge(t, b, desired)

		// Teardown of all of it is as few processes (the plan's reads aside):
		// a tc batch up to the IFBs, which go (after their redirects) in one
		// ip batch, then a tc batch for the rest.
		counting = &faultyRunner{inner: execrun.Exec{}}
		b.Runner = counting
		if _, err := b.Teardown(ctx); err != nil {
			t.Fatalf("teardown: %v", err)
		}
		writes := 0
		for _, c := range counting.calls {
			if !strings.Contains(strings.Join(c.Argv, " "), " show") {
				writes++
			}
		}
		if writes > 3 {
			t.Errorf("teardown of %d links ran %d processes that change the kernel, want at most 3", links, writes)
		}
		b.Runner = execrun.Exec{}
		mustConverge(t, b, shape.State{})
	})
}

// A line the kernel refuses stops the batch; the op it belongs to is named
// with tc's own message, the ops before it are done, and the next plan
// completes the rest.
func TestKernelBatchFailureNamesTheOpAndConverges(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns := kernelNetns(t, "wan0", "wan1")
		b := ks.backend(t, ns, execrun.Exec{})
		ctx := context.Background()
		desired := shape.State{Links: []shape.Link{wanLink("wan0", 0), wanLink("wan1", 1)}}
		desired.Links[1].Name = "wan1"
		p, err := b.Plan(ctx, desired)
		if err != nil {
			t.Fatal(err)
		}
		// wan1 goes away between the plan and the apply: the kernel refuses
		// the first line that names it.
		sh(t, "ip", "-n", ns, "link", "del", "wan1")
		var done []plan.Op
		var failed plan.Op
		err = b.ExecuteBatch(ctx, p.Ops, func(i int, err error) {
			if err != nil {
				failed = p.Ops[i]
			} else {
				done = append(done, p.Ops[i])
			}
		})
		if err == nil {
			t.Fatalf("ExecuteBatch succeeded on a deleted interface:\n%s", formatPlan(p))
		}
		if failed.Interface != "wan1" || !strings.Contains(err.Error(), failed.Label) || !strings.Contains(err.Error(), "Cannot find device") {
			t.Errorf("failed op %q (interface %q), error %v: want wan1's first op, named, with tc's message", failed.Label, failed.Interface, err)
		}
		for _, op := range done {
			// The IFB is a device of its own, made before the failure.
			if op.Interface == "wan1" && op.Kind != "ifb" {
				t.Errorf("op %q reported done on the deleted interface", op.Label)
			}
		}
		// Back again (deleting wan1 took its peer with it).
		sh(t, "ip", "-n", ns, "link", "add", "wan1", "type", "veth", "peer", "name", "peer1")
		sh(t, "ip", "-n", ns, "link", "set", "wan1", "up")
		apply(t, b, desired)
		mustConverge(t, b, desired)
	})
}
