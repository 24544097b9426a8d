// SPDX-License-Identifier: Apache-2.0

package reconcile_test

import (
	"context"
	"testing"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/state"
)

// An apply reads the live state once to look up slots and plan, and once
// more to check what it applied; an apply with nothing to do reads it
// once. A reading of pf and dummynet is five calls; taking pf's reference
// reads pf's references once more first (the intent that lets a crash
// between the two converge, issue 12 item 1).
func TestApplyReadsTheLiveStateOncePerStep(t *testing.T) {
	const reading = 5
	emu := pfdntest.New()
	m := newMac(t, emu)
	links, facts := fiftyLinks(t, "100mbit")
	pass := func() reconcile.Outcome {
		t.Helper()
		emu.ResetCalls()
		out := reconcile.Pass(context.Background(), reconcile.PassInput{Run: reconcile.Run{Backend: m.backend, Store: m.tokens, Do: reconcile.ApplyPlan, Verify: true},
			Links: links, Facts: facts, Inputs: desired.Inputs{State: m.tokens.State}})
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		return out
	}
	reads := func() int {
		n := 0
		for _, c := range emu.Calls() {
			if !c.Mutating {
				n++
			}
		}
		return n
	}
	// From empty: 50 new slots, so the pass asks which slots are live.
	if out := pass(); len(out.Applied.Ops) == 0 || len(m.tokens.State.Slots) != 50 {
		t.Fatalf("applied %d ops, %d slots", len(out.Applied.Ops), len(m.tokens.State.Slots))
	}
	if n := reads(); n != 2*reading+1 {
		t.Errorf("apply from empty made %d reads, want %d: one reading for the slots and the plan, pf's references before taking one, one reading for the check", n, 2*reading+1)
	}
	if out := pass(); !out.Plan.Empty() {
		t.Fatalf("second apply planned %d ops", len(out.Plan.Ops))
	}
	if n := reads(); n != reading {
		t.Errorf("apply with nothing to do made %d reads, want %d", n, reading)
	}
	// A lost state file: the slots are looked up again, in the same reading.
	if err := m.tokens.Update(func(s *state.State) { s.Slots = nil }); err != nil {
		t.Fatal(err)
	}
	if out := pass(); !out.Plan.Empty() {
		t.Fatalf("apply after a lost state file planned %d ops", len(out.Plan.Ops))
	}
	if n := reads(); n != reading {
		t.Errorf("apply after a lost state file made %d reads, want %d", n, reading)
	}
}
