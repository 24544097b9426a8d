// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/shape"
)

// fiftyLinks is a large desired state: 50 links, each with six reflectors.
func fiftyLinks() shape.State {
	var s shape.State
	for i := 0; i < 50; i++ {
		l := link(fmt.Sprintf("link%02d", i), fmt.Sprintf("en%d", i), i, 20+float64(i), 250+float64(i), 64<<10, icmpAddrs...)
		l.Reflectors = append(l.Reflectors, shape.ICMPReflector(google))
		s.Links = append(s.Links, l)
	}
	return s
}

// fiftyLinksConverged returns a harness converged to fiftyLinks, with
// the desired state and the live state it reads.
func fiftyLinksConverged(b *testing.B) (*harness, shape.State, pfdn.Live) {
	ctx := context.Background()
	desired := fiftyLinks()
	h := newHarness(b, nil)
	h.converge(ctx, desired)
	live, err := h.b.Observe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return h, desired, live
}

// BenchmarkDiff50Links measures the pure diff of 50 links against a full,
// matching live state (the drift check's common case).
func BenchmarkDiff50Links(b *testing.B) {
	h, desired, live := fiftyLinksConverged(b)
	d, err := pfdn.Render(desired, h.b.Options())
	if err != nil {
		b.Fatal(err)
	}
	token := h.tokens.PFToken()
	b.ReportAllocs()
	for b.Loop() {
		if p := pfdn.Diff(d, live, token); !p.Empty() {
			b.Fatal("not converged")
		}
	}
}

// BenchmarkRenderAndDiff50Links adds rendering the desired state.
func BenchmarkRenderAndDiff50Links(b *testing.B) {
	h, desired, live := fiftyLinksConverged(b)
	token := h.tokens.PFToken()
	b.ReportAllocs()
	for b.Loop() {
		d, _ := pfdn.Render(desired, h.b.Options())
		pfdn.Diff(d, live, token)
	}
}

// BenchmarkNoopPlan50Links is a whole no-op plan (observe through the
// in-process emulator, parse, render, diff) and reports how many commands
// one plan runs, all of them reads. On a Mac each command is one short
// pfctl/dnctl process; the emulator's own work is included here.
func BenchmarkNoopPlan50Links(b *testing.B) {
	ctx := context.Background()
	desired := fiftyLinks()
	h := newHarness(b, nil)
	h.converge(ctx, desired)
	h.e.ResetCalls()
	b.ReportAllocs()
	for b.Loop() {
		if p, err := h.b.Plan(ctx, desired); err != nil || !p.Empty() {
			b.Fatalf("not a no-op: %v", err)
		}
	}
	calls, mutating := len(h.e.Calls()), len(h.e.MutatingCalls())
	b.ReportMetric(float64(calls)/float64(b.N), "commands/plan")
	b.ReportMetric(float64(mutating)/float64(b.N), "mutating/plan")
	if mutating != 0 {
		b.Fatalf("a no-op plan ran %d mutating commands", mutating)
	}
}

// BenchmarkParseDummynet100Pipes parses the listing of 100 pipes.
func BenchmarkParseDummynet100Pipes(b *testing.B) {
	ctx := context.Background()
	h := newHarness(b, nil)
	h.converge(ctx, fiftyLinks())
	live, _ := h.e.Run(ctx, pipeList)
	b.SetBytes(int64(len(live.Stdout)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pfdn.ParseDummynet(live.Stdout); err != nil {
			b.Fatal(err)
		}
	}
}
