// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// manyLinks is n links, two pipes each.
func manyLinks(n int) shape.State {
	var s shape.State
	for i := range n {
		s.Links = append(s.Links, link(fmt.Sprintf("link%03d", i), fmt.Sprintf("en%d", i), i, 20+float64(i), 250+float64(i), 64<<10, icmpAddrs...))
	}
	return s
}

// batchApply plans desired and carries the plan out with ExecuteBatch,
// returning the labels reported done, the failed op's label and the error.
func (h *harness) batchApply(ctx context.Context, desired shape.State) (p plan.Plan, done []string, failed string, err error) {
	h.t.Helper()
	h.record(desired)
	p, err = h.b.Plan(ctx, desired)
	if err != nil {
		h.t.Fatalf("plan: %v", err)
	}
	err = h.b.ExecuteBatch(ctx, p.Ops, func(i int, err error) {
		if err != nil {
			failed = p.Ops[i].Label
		} else {
			done = append(done, p.Ops[i].Label)
		}
	})
	return p, done, failed, err
}

// Apply from empty with 200 links is three processes that change the Mac
// (every pipe in one dnctl file, the pf reference, the anchor), not one
// per pipe, and converges.
func TestBatchApplyFromEmptyIsThreeProcesses(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	desired := manyLinks(200)
	p, done, _, err := h.batchApply(ctx, desired)
	if err != nil || len(done) != len(p.Ops) {
		t.Fatalf("ExecuteBatch did %d of %d ops: %v", len(done), len(p.Ops), err)
	}
	var argv []string
	for _, c := range h.e.MutatingCalls() {
		argv = append(argv, strings.Join(c.Argv, " "))
	}
	if len(argv) != 3 || !strings.HasSuffix(argv[0], "dnctl /dev/stdin") {
		t.Errorf("%d ops ran as %d mutating processes, want 3 (one dnctl file first):\n%s", len(p.Ops), len(argv), strings.Join(argv, "\n"))
	}
	h.checkShaped(desired)
	if again, err := h.b.Plan(ctx, desired); err != nil || !again.Empty() {
		t.Fatalf("re-plan after the batch: %v\n%s", err, listing(again))
	}
}

// A pipe line dnctl refuses ends the file there: dnctl's "Line N:" names
// the op, the pipes before it are configured and reported done, nothing
// after it is, no traffic is blackholed, and the next apply converges.
// The same for a dnctl that hangs on a line (killed at the timeout: the
// first pipe of the file is blamed, as nothing tells how far it got).
func TestBatchFailedOrHungLineIsNamedAndConverges(t *testing.T) {
	for _, c := range []struct {
		name       string
		fault      pfdntest.Fault
		wantFailed string
		wantDone   int
		wantText   string
	}{
		{"refused line", pfdntest.Fault{Match: `^dnctl pipe 48005 config`, Kind: pfdntest.Fail, ExitCode: 65}, "48005", 4, "Line 5: injected failure"},
		{"hung line", pfdntest.Fault{Match: `^dnctl pipe 48005 config`, Kind: pfdntest.Hang}, "48001", 0, "timed out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			e := pfdntest.New()
			h := newHarness(t, e)
			opts := h.b.Options()
			opts.CommandTimeout = 200 * time.Millisecond
			b, err := pfdn.New(e, h.tokens, opts)
			if err != nil {
				t.Fatal(err)
			}
			h.b = b
			desired := manyLinks(4)
			if err := e.AddFault(c.fault); err != nil {
				t.Fatal(err)
			}
			_, done, failed, err := h.batchApply(ctx, desired)
			if err == nil || !strings.Contains(failed, c.wantFailed) || !strings.Contains(err.Error(), c.wantText) || !strings.Contains(err.Error(), failed) {
				t.Fatalf("failed op %q, err %v; want pipe %s named with %q", failed, err, c.wantFailed, c.wantText)
			}
			if len(done) != c.wantDone {
				t.Errorf("done %v, want the %d pipes before the failed line", done, c.wantDone)
			}
			live, err := h.b.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(live.Dummynet.Pipes); n != 4 && c.name == "refused line" {
				t.Errorf("%d pipes live after line 5 failed, want the 4 before it", n)
			}
			h.noBlackhole(desired)
			e.ClearFaults()
			h.converge(ctx, desired)
			h.checkShaped(desired)
		})
	}
}
