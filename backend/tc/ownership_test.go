// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
)

// failingOwnership is an Ownership whose saves fail, like a state file on
// a read-only disk.
type failingOwnership struct{ MemoryOwnership }

func (f *failingOwnership) SetRootOwned(string, bool) error { return errors.New("disk full") }

// TestBackendLearnsAndRestoresItsRoot walks the ownership record through a
// backend's life on recorded kernel states: a converged observation
// teaches the record that wan0's root is macake's (lan0's foreign pfifo
// is never recorded); once someone replaces wan0's root, the plan restores
// it with one replace; a backend that lost the record (a new process
// without the state file) leaves the same pfifo alone and says upload is
// not shaped.
func TestBackendLearnsAndRestoresItsRoot(t *testing.T) {
	ctx := context.Background()
	desired := readDesired(t, "testdata/diff/htb-converged/desired.json")
	owners := &MemoryOwnership{}

	converged := loadRecording(t, "htb-converged")
	b := fakeBackend(converged.runner(), converged.caps)
	b.Owners = owners
	if _, err := b.Plan(ctx, desired); err != nil {
		t.Fatal(err)
	}
	if got := owners.OwnedRoots(); !got["wan0"] || got["lan0"] || len(got) != 1 {
		t.Fatalf("after observing macake's root on wan0 the record is %v, want only wan0", got)
	}

	replaced := loadRecording(t, "htb-root-replaced")
	r := replaced.runner()
	b = fakeBackend(r, replaced.caps)
	b.Owners = owners
	p, err := b.Plan(ctx, desired)
	if err != nil {
		t.Fatal(err)
	}
	var restore *plan.Op
	for i, op := range p.Ops {
		if op.Kind == KindShaper && op.ID == "wan0" {
			restore = &p.Ops[i]
		}
	}
	if restore == nil || restore.Action != plan.Update || !strings.Contains(restore.Reason, "replaced by someone else (pfifo 1:)") {
		t.Fatalf("no op restores wan0's root:\n%s", formatPlan(p))
	}
	if got := strings.Join(restore.Commands[0].Argv, " "); got != "tc qdisc replace dev wan0 root handle 4d4b: htb default 1" {
		t.Errorf("the restore starts with %q, want an atomic replace of the foreign root", got)
	}
	if un := p.Unshaped(); len(un) != 1 || un[0].Link != "lan" {
		t.Errorf("unshaped warnings = %+v, want only lan's upload (its pfifo was there first)", un)
	}

	forgetful := fakeBackend(replaced.runner(), replaced.caps)
	p, err = forgetful.Plan(ctx, desired)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range p.Ops {
		if op.ID == "wan0" {
			t.Errorf("without the record the plan touches wan0: %s (%s)", op.Label, op.Reason)
		}
	}
	if !hasUnshaped(p, "wan", "upload", "wan0 has a root qdisc macake does not own (pfifo 1:)") {
		t.Errorf("without the record there is no unshaped warning for wan's upload:\n%s", formatPlan(p))
	}
}

// TestExecuteKeepsTheOwnershipRecord: a shaper put on an interface is
// recorded only once its commands succeeded, a shaper on an IFB never is
// (it is macake's by name), a removal forgets it, and a record that cannot
// be saved fails the op so apply says so.
func TestExecuteKeepsTheOwnershipRecord(t *testing.T) {
	ctx := context.Background()
	fail := false
	r := runnerFunc(func(c execrun.Command) (execrun.Result, error) {
		if fail {
			return execrun.Result{ExitCode: 2, Stderr: []byte("RTNETLINK answers: Invalid argument\n")}, nil
		}
		return execrun.Result{}, nil
	})
	owners := &MemoryOwnership{}
	b := fakeBackend(r, htbCaps)
	b.Owners = owners
	cmd := []execrun.Command{{Argv: []string{"tc", "qdisc", "add"}}}
	shaper := func(dev string, a plan.Action) plan.Op {
		return plan.Op{Kind: KindShaper, ID: dev, Action: a, Label: "shaper on " + dev, Commands: cmd}
	}

	fail = true
	if err := b.Execute(ctx, shaper("eth0", plan.Create)); err == nil || owners.OwnedRoots()["eth0"] {
		t.Fatalf("a failed create: err %v, record %v; want an error and no record", err, owners.OwnedRoots())
	}
	fail = false
	for _, op := range []plan.Op{shaper("eth0", plan.Create), shaper(IFBName(2), plan.Create), {Kind: "ifb", ID: "eth1", Action: plan.Create, Commands: cmd}} {
		if err := b.Execute(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if got := owners.OwnedRoots(); !got["eth0"] || len(got) != 1 {
		t.Fatalf("record = %v, want only eth0", got)
	}
	if err := b.Execute(ctx, plan.Op{Kind: KindShaper, ID: "eth0", Action: plan.Remove, Label: "shaper on eth0", Commands: []execrun.Command{}}); err != nil {
		t.Fatal(err)
	}
	if got := owners.OwnedRoots(); len(got) != 0 {
		t.Fatalf("record after the removal = %v, want empty", got)
	}

	b.Owners = &failingOwnership{}
	if err := b.Execute(ctx, shaper("eth0", plan.Create)); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Execute with an unsavable record = %v, want the save error", err)
	}
}

func hasUnshaped(p plan.Plan, link, dir, sub string) bool {
	for _, w := range p.Unshaped() {
		if w.Link == link && strings.Contains(w.Message, sub) && strings.Contains(strings.Join(w.Unshaped, ","), dir) {
			return true
		}
	}
	return false
}
