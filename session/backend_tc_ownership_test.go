// SPDX-License-Identifier: Apache-2.0

package session_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/backend/tc/tctest"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// TestTCRestoresReplacedRootFromStateFile drives the tc backend as apply
// and watch open it, on a recorded kernel where someone replaced macake's
// root on wan0 with pfifo 1:. The state file's record decides: with
// wan0 recorded (macake put its shaper there) the plan restores it, the
// apply runs one replace and the record stays on disk; with a state file
// that has no record (the pfifo could have been there first) the plan
// touches nothing and reports wan's upload as not shaped, and its text
// does not claim the live state matches.
func TestTCRestoresReplacedRootFromStateFile(t *testing.T) {
	ctx := context.Background()
	desired := golden.ReadJSON[shape.State](t, "../backend/tc/testdata/diff/htb-root-replaced/desired.json")
	open := func(owned []string) (backend.Backend, *state.File, *tctest.Executing) {
		t.Helper()
		dir := t.TempDir()
		if err := state.Save(dir, &state.State{TCOwnedRoots: owned}); err != nil {
			t.Fatal(err)
		}
		st, err := state.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		tokens := &state.File{Dir: dir, State: st}
		run := &tctest.Executing{Recorded: recorded(t, "../backend/tc/testdata/diff/htb-root-replaced/live.txtar")}
		b, err := backend.Open(backend.Config{GOOS: "linux", Getenv: envOf(), Runner: run, Store: tokens})
		if err != nil {
			t.Fatal(err)
		}
		b.(*tc.Backend).SetCapabilities(tc.Capabilities{HTB: true, BFIFO: true, Ingress: true, U32: true, Mirred: true, IFB: true, Method: "test"})
		return b, tokens, run
	}

	b, tokens, run := open([]string{"wan0"})
	p, err := b.Plan(ctx, desired)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ops) == 0 || p.Ops[0].ID != "wan0" || p.Ops[0].Reason != "root qdisc on wan0 replaced by someone else (pfifo 1:); restoring macake's shaper" {
		t.Fatalf("the plan does not restore wan0's root first: %+v", p.Ops)
	}
	if _, err := reconcile.Apply(ctx, b, p, nil); err != nil {
		t.Fatal(err)
	}
	if len(run.Ran) == 0 || run.Ran[0] != "qdisc replace dev wan0 root handle 4d4b: htb default 1" {
		t.Errorf("the repair ran %q first, want the replace of the foreign root", run.Ran)
	}
	reloaded, err := state.Load(tokens.Dir)
	if err != nil || len(reloaded.TCOwnedRoots) != 1 || reloaded.TCOwnedRoots[0] != "wan0" {
		t.Errorf("state file record after the repair = %v, %v; want [wan0]", reloaded.TCOwnedRoots, err)
	}

	b, tokens, run = open(nil)
	p, err = b.Plan(ctx, desired)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range p.Ops {
		if op.ID == "wan0" {
			t.Errorf("without a record the plan touches wan0: %s (%s)", op.Label, op.Reason)
		}
	}
	var text bytes.Buffer
	plan.WriteText(&text, p, plan.TextOptions{Subject: "Live tc state matches /etc/macake/links.d."})
	if out := text.String(); strings.Contains(out, "matches") || !strings.Contains(out, `link "lan" upload, link "wan" upload not shaped`) {
		t.Errorf("plan text:\n%s\nwant no claim that it matches, and both links' upload named as not shaped", out)
	}
	if reloaded, _ := state.Load(tokens.Dir); len(reloaded.TCOwnedRoots) != 0 {
		t.Errorf("a foreign root was recorded as macake's: %v", reloaded.TCOwnedRoots)
	}
	if len(run.Ran) != 0 {
		t.Errorf("planning ran %q", run.Ran)
	}
}
