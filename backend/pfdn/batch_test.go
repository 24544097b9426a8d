// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"fmt"
	"slices"
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

// Down of 200 links deletes every pipe in one dnctl, as apply configures
// them: three processes that change the Mac (the anchor, the pipes, the
// pf reference), where one per pipe made it 50 times slower than apply
// (issue 27); and nothing macake owns is left.
func TestBatchTeardownIsThreeProcesses(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	desired := manyLinks(200)
	if _, _, _, err := h.batchApply(ctx, desired); err != nil {
		t.Fatal(err)
	}
	h.e.ResetCalls()
	done, err := h.b.Teardown(ctx)
	if err != nil || len(done.Ops) != 402 {
		t.Fatalf("Teardown did %d ops: %v", len(done.Ops), err)
	}
	var argv []string
	for _, c := range h.e.MutatingCalls() {
		argv = append(argv, strings.Join(c.Argv, " "))
	}
	if len(argv) != 3 || !strings.Contains(argv[1], "dnctl pipe delete 48001 48002 48003") {
		t.Errorf("down of 200 links ran %d mutating processes, want 3 (one dnctl for the pipes):\n%s", len(argv), strings.Join(argv, "\n"))
	}
	if again, err := h.b.Plan(ctx, shape.State{}); err != nil || !again.Empty() {
		t.Fatalf("re-plan after the teardown: %v\n%s", err, listing(again))
	}
}

// A batched delete goes past a pipe already gone (done, as one by one)
// and past one the kernel refuses, which fails its op alone and is
// named; the next teardown finishes.
func TestBatchTeardownPipeGoneOrRefused(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	if _, _, _, err := h.batchApply(ctx, manyLinks(3)); err != nil {
		t.Fatal(err)
	}
	p, err := h.b.Plan(ctx, shape.State{})
	if err != nil {
		t.Fatal(err)
	}
	h.e.DeletePipe(48002) // gone between the plan and the delete
	if err := h.e.AddFault(pfdntest.Fault{Match: `^dnctl pipe delete`, Kind: pfdntest.Fail, AfterEffect: true, ExitCode: 1,
		Stderr: "dnctl: rule 48004: setsockopt(IP_DUMMYNET_DEL): Operation not permitted\n"}); err != nil {
		t.Fatal(err)
	}
	var done []string
	var failed string
	err = h.b.ExecuteBatch(ctx, p.Ops, func(i int, err error) {
		if err != nil {
			failed = p.Ops[i].ID
		} else {
			done = append(done, p.Ops[i].ID)
		}
	})
	if err == nil || failed != "48004" || !strings.Contains(err.Error(), "Operation not permitted") {
		t.Fatalf("failed %q, err %v; want pipe 48004 named", failed, err)
	}
	for _, id := range []string{"48002", "48001", "48003", "48005", "48006"} {
		if !slices.Contains(done, id) {
			t.Errorf("pipe %s not reported done: %v", id, done)
		}
	}
	h.e.ClearFaults()
	if _, err := h.b.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	if again, err := h.b.Plan(ctx, shape.State{}); err != nil || !again.Empty() {
		t.Fatalf("re-plan after the second teardown: %v\n%s", err, listing(again))
	}
}
