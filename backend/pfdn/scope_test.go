// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"strings"
	"testing"

	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// TestPlanLinkChangesOneLinkOnly: with wan and lte live and both changed
// in the desired state, the plan for lte changes lte's pipe and lte's
// rules and nothing of wan's, though both are in one anchor; applied, it
// leaves wan as it was and the full plan then shows only wan's changes.
func TestPlanLinkChangesOneLinkOnly(t *testing.T) {
	ctx := context.Background()
	h := shapedWanLTE(t)
	wan, _ := wanLTE.Link("wan")
	lte, _ := wanLTE.Link("lte")
	wan.Download.RateBits *= 2
	lte.Download.RateBits *= 2
	lte.Reflectors = []shape.Reflector{shape.ICMPReflector(cloudflare)}
	changed := state(wan, lte)

	p, err := h.b.PlanLink(ctx, changed, "lte")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range p.Ops {
		got = append(got, op.Label)
		if op.Link != "lte" {
			t.Errorf("op %s belongs to %q, not lte", op.Label, op.Link)
		}
	}
	if len(p.Ops) != 2 || p.Ops[0].Label != `pipe 48004 "lte/download"` || p.Ops[1].Kind != "rules" {
		t.Fatalf("plan for lte: %v\n%s", got, listing(p))
	}
	anchor := p.Ops[1].Commands[0].Stdin
	for _, want := range []string{"dummynet out on en0 all pipe 48001", "dummynet out on en5 all pipe 48003", "on en5 inet proto icmp from any to 1.1.1.1"} {
		if !strings.Contains(anchor, want) {
			t.Errorf("the reloaded anchor lacks %q (wan's live rules must stay, lte's must be new):\n%s", want, anchor)
		}
	}
	if _, err := h.apply(ctx, state(wanLTE.Links[0], lte)); err != nil {
		t.Fatal(err)
	}
	full, err := h.b.Plan(ctx, changed)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Ops) != 1 || full.Ops[0].Link != "wan" {
		t.Errorf("after lte alone, the full plan must be wan's change only:\n%s", listing(full))
	}
}

// TestPlanLinkRemovesOneLink: the plan for a link the desired state no
// longer shapes removes its pipes and rules, keeps the other's and keeps
// the pf reference; for the last link it releases the reference too.
func TestPlanLinkRemovesOneLink(t *testing.T) {
	ctx := context.Background()
	h := shapedWanLTE(t)
	gone := shape.State{Unshaped: []shape.Unshaped{{Name: "lte", Slot: 1, Reason: "removed"}}}
	p, err := h.b.PlanLink(ctx, gone, "lte")
	if err != nil {
		t.Fatal(err)
	}
	c, u, r := p.Count()
	if c != 0 || u != 1 || r != 2 {
		t.Fatalf("removing lte alone: %d create, %d update, %d remove:\n%s", c, u, r, listing(p))
	}
	for _, op := range p.Ops {
		if op.Kind == "pf-reference" {
			t.Errorf("the pf reference must stay while wan is shaped:\n%s", listing(p))
		}
	}
	if _, err := h.apply(ctx, wanLTE); err != nil { // nothing to do: still converged
		t.Fatal(err)
	}
	for _, op := range p.Ops {
		if err := h.b.Execute(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	wanOnly, _ := wanLTE.Link("wan")
	if rest, err := h.b.Plan(ctx, state(wanOnly)); err != nil || !rest.Empty() {
		t.Errorf("after removing lte alone, wan must be exactly as it was:\n%s %v", listing(rest), err)
	}
	last, err := h.b.PlanLink(ctx, shape.State{Unshaped: []shape.Unshaped{{Name: "wan", Slot: 0}}}, "wan")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(last.Ops); n == 0 || last.Ops[n-1].Kind != "pf-reference" || last.Ops[n-1].Action != plan.Remove {
		t.Errorf("removing the last link must release the pf reference:\n%s", listing(last))
	}
}

// TestPlanLinkRefusesATakeover: a link that would move onto an interface
// whose live rules are another link's changes two links at once.
func TestPlanLinkRefusesATakeover(t *testing.T) {
	ctx := context.Background()
	h := shapedWanLTE(t)
	lte, _ := wanLTE.Link("lte")
	lte.Interface = "en0"
	_, err := h.b.PlanLink(ctx, state(lte), "lte")
	if err == nil || !strings.Contains(err.Error(), `take interface en0 over from link "wan"`) {
		t.Errorf("lte onto wan's en0: %v", err)
	}
}
