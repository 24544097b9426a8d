// SPDX-License-Identifier: Apache-2.0

package reconcile_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/state"
)

// withForeignState puts other tools' objects on the Mac: Network Link
// Conditioner's pipes and anchor, a daemon's pf reference, a pipe inside
// macake's range that macake did not make. macake must leave all of them
// exactly as they are.
func withForeignState(t testing.TB, emu *pfdntest.Emulator) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct {
		stdin string
		argv  []string
	}{
		{"", []string{"dnctl", "pipe", "40269", "config", "bw", "1Mbit/s", "delay", "100"}},
		{"", []string{"dnctl", "pipe", "48500", "config", "bw", "2Mbit/s", "delay", "20", "plr", "0.01"}},
		{"dummynet out on en0 all pipe 40269\n", []string{"pfctl", "-a", "com.apple/nlc", "-f", "-"}},
	} {
		if res, err := emu.Foreign(ctx, c.stdin, c.argv...); err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %s", c.argv, err, res.Stderr)
		}
	}
	emu.TakeReference(118, "com.apple.InternetSharing")
}

// desiredConfig is one (policies, facts, watch inputs) combination.
type desiredConfig struct {
	name         string
	links, facts string
	in           desired.Inputs
}

// goldenConfigs returns every golden case whose Desired succeeds and whose
// Mac keeps the hook: the set of desired states to cycle through.
func goldenConfigs(t *testing.T) []desiredConfig {
	var out []desiredConfig
	for _, dir := range golden.Glob(t, "testdata/golden/*") {
		switch filepath.Base(dir) {
		case "hook-missing", "auto-unmeasured", "measured-profile":
			continue
		}
		out = append(out, desiredConfig{
			name: filepath.Base(dir), links: filepath.Join(dir, "links.d"), facts: filepath.Join(dir, "facts.json"),
			in: caseInputs(t, dir),
		})
		if _, err := os.Stat(filepath.Join(dir, "previous")); err == nil {
			out = append(out, desiredConfig{name: filepath.Base(dir) + "/previous", links: filepath.Join(dir, "previous", "links.d"), facts: filepath.Join(dir, "facts.json")})
		}
	}
	if len(out) < 8 {
		t.Fatalf("only %d desired configurations", len(out))
	}
	return out
}

// TestConvergenceInRandomOrder moves one Mac through the golden cases'
// desired states in a random (seeded) order. After every apply a re-plan
// is empty and a second apply runs no mutating command; other tools'
// objects are never touched; and down at the end leaves the Mac exactly as
// it was before macake.
func TestConvergenceInRandomOrder(t *testing.T) {
	configs := goldenConfigs(t)
	for _, seed := range []uint64{1, 2, 3} {
		rng := rand.New(rand.NewPCG(seed, 0x6d6163616b65))
		emu := pfdntest.New()
		withForeignState(t, emu)
		before := emu.Snapshot().String()
		m := newMac(t, emu)
		var order []string
		for step := 0; step < 3*len(configs); step++ {
			c := configs[rng.IntN(len(configs))]
			order = append(order, c.name)
			d := m.mustDesire(c.links, c.facts, c.in)
			m.converge(d)
			snap := emu.Snapshot()
			if snap.Pipes[40269] == "" || snap.Pipes[48500] == "" || snap.Rulesets["com.apple/nlc"] == "" {
				t.Fatalf("seed %d, after %v: a foreign object is gone:\n%s", seed, order, snap)
			}
		}
		if _, err := m.backend.Teardown(context.Background()); err != nil {
			t.Fatalf("seed %d: down: %v", seed, err)
		}
		if after := emu.Snapshot().String(); after != before {
			t.Fatalf("seed %d, after %v and down, the Mac differs from before macake:\n--- after ---\n%s--- before ---\n%s", seed, order, after, before)
		}
		if m.tokens.State.PFToken != "" {
			t.Fatalf("seed %d: down left the token %q in the state file", seed, m.tokens.State.PFToken)
		}
	}
}

// TestApplyStopsAtTheFirstFailure checks that Apply runs nothing after a
// failed op and says which step failed.
func TestApplyStopsAtTheFirstFailure(t *testing.T) {
	emu := pfdntest.New()
	m := newMac(t, emu)
	d := m.mustDesire("testdata/golden/empty-mac/links.d", "testdata/golden/empty-mac/facts.json", desired.Inputs{})
	if err := emu.AddFault(pfdntest.Fault{Match: `^dnctl pipe 48002 config`, Kind: pfdntest.Fail}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	p, err := m.backend.Plan(context.Background(), d.State)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.tokens.Update(func(s *state.State) { s.Slots = d.Slots }); err != nil {
		t.Fatal(err)
	}
	applied, err := reconcile.Apply(context.Background(), m.backend, p, func(op plan.Op, err error) {
		seen = append(seen, op.Label)
	})
	var ae *reconcile.ApplyError
	if !errors.As(err, &ae) || ae.Step != 2 || ae.Steps != len(p.Ops) {
		t.Fatalf("err %v, want an ApplyError at step 2 of %d", err, len(p.Ops))
	}
	if !strings.Contains(err.Error(), `step 2 of 4 (create pipe 48002 "starlink/download") failed`) || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("unclear message: %v", err)
	}
	if len(applied.Ops) != 1 || applied.Failed == nil || applied.Failed.ID != "48002" || len(seen) != 2 {
		t.Fatalf("applied %d ops, failed %v, progress saw %v", len(applied.Ops), applied.Failed, seen)
	}
	// Both pipes go to one dnctl file, which line 2 ends.
	if calls := emu.MutatingCalls(); len(calls) != 1 {
		t.Fatalf("%d mutating calls, want 1 (the dnctl file; nothing after the failure)", len(calls))
	}
	emu.ClearFaults()
	m.converge(d)
}

// TestCrashBetweenPipesAndRules: apply records the slot in the state file
// before it creates the pipes, so a crash after the pipes and before the
// anchor leaves pipes that the next run (a new process reading the state
// file) can prove are macake's and finishes. Without the state file
// nothing proves it: those pipes are left alone with a warning that says
// how to remove them, and the link is shaped on another slot.
func TestCrashBetweenPipesAndRules(t *testing.T) {
	const links, facts = "testdata/golden/empty-mac/links.d", "testdata/golden/empty-mac/facts.json"
	crash := func(t *testing.T, emu *pfdntest.Emulator, dir string) {
		m := newMacIn(t, emu, dir, settings.Daemon{})
		d := m.mustDesire(links, facts, desired.Inputs{})
		if err := emu.AddFault(pfdntest.Fault{Match: `^pfctl -a com\.apple/macake -f -`, Kind: pfdntest.Fail}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.apply(d); err == nil {
			t.Fatal("the injected crash did not stop the apply")
		}
		emu.ClearFaults()
		if snap := emu.Snapshot(); snap.Pipes[48001] == "" || snap.Pipes[48002] == "" || snap.Rulesets["com.apple/macake"] != "" {
			t.Fatalf("not the half-applied state wanted:\n%s", snap)
		}
	}

	t.Run("state-kept", func(t *testing.T) {
		emu := pfdntest.New()
		withForeignState(t, emu)
		before := emu.Snapshot().String()
		dir := t.TempDir()
		crash(t, emu, dir)
		m := newMacIn(t, emu, dir, settings.Daemon{}) // the next run
		d := m.mustDesire(links, facts, desired.Inputs{})
		if d.Slots["starlink"] != 0 {
			t.Fatalf("the slot moved: %v", d.Slots)
		}
		p := m.converge(d)
		for _, op := range p.Ops {
			if op.Kind == "pipe" && op.Action != plan.Update && op.Action != plan.Create {
				t.Fatalf("unexpected op %s %s", op.Action, op.Label)
			}
		}
		if _, err := m.backend.Teardown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if after := emu.Snapshot().String(); after != before {
			t.Fatalf("after down the Mac differs:\n%s--- want\n%s", after, before)
		}
	})

	t.Run("state-lost", func(t *testing.T) {
		emu := pfdntest.New()
		withForeignState(t, emu)
		crash(t, emu, t.TempDir())
		orphans := emu.Snapshot()
		m := newMac(t, emu) // a new, empty state directory
		d := m.mustDesire(links, facts, desired.Inputs{})
		if d.Slots["starlink"] != 1 {
			t.Fatalf("starlink got slot %d; slot 0 holds pipes nothing proves are macake's, so it must take 1", d.Slots["starlink"])
		}
		p := m.converge(d)
		text := planText(p)
		for _, n := range []string{"48001", "48002"} {
			if !strings.Contains(text, "sudo dnctl pipe delete "+n) {
				t.Errorf("no warning tells how to remove pipe %s:\n%s", n, text)
			}
		}
		if _, err := m.backend.Teardown(context.Background()); err != nil {
			t.Fatal(err)
		}
		snap := emu.Snapshot()
		if snap.Pipes[48001] != orphans.Pipes[48001] || snap.Pipes[48002] != orphans.Pipes[48002] || snap.Pipes[48003] != "" {
			t.Fatalf("down must leave the unprovable pipes and remove its own:\n%s", snap)
		}
	})
}

// TestForeignPipeInRangeIsNeverTouched is the audit's case: with an empty
// state file, another tool's pipes at macake's first slot and at a
// macake-looking one are neither reconfigured by apply nor deleted by down,
// and the link is shaped on the first slot they leave free.
func TestForeignPipeInRangeIsNeverTouched(t *testing.T) {
	emu := pfdntest.New()
	ctx := context.Background()
	for _, argv := range [][]string{
		{"dnctl", "pipe", "48001", "config", "bw", "2Mbit/s"},
		{"dnctl", "pipe", "48003", "config", "bw", "1Mbit/s", "queue", "10Kbytes"},
	} {
		if res, err := emu.Foreign(ctx, "", argv...); err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %s", argv, err, res.Stderr)
		}
	}
	before := emu.Snapshot()
	m := newMac(t, emu)
	d := m.mustDesire("testdata/golden/empty-mac/links.d", "testdata/golden/empty-mac/facts.json", desired.Inputs{})
	if d.Slots["starlink"] != 2 {
		t.Fatalf("starlink got slot %d, want 2 (slots 0 and 1 hold another tool's pipes)", d.Slots["starlink"])
	}
	p := m.converge(d)
	for _, op := range p.Ops {
		if op.ID == "48001" || op.ID == "48003" {
			t.Fatalf("apply touches a foreign pipe: %s %s", op.Action, op.Label)
		}
	}
	for _, n := range []int{48001, 48003} {
		if got := emu.Snapshot().Pipes[n]; got != before.Pipes[n] {
			t.Fatalf("pipe %d changed: %q, was %q", n, got, before.Pipes[n])
		}
	}
	if _, err := m.backend.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	if after := emu.Snapshot().String(); after != before.String() {
		t.Fatalf("after down:\n%s--- want\n%s", after, before)
	}
}

// TestReflectorOrderNeverMatters checks that the anchor's exemption rules
// depend on a link's reflector set, not its order: what one-shot apply
// installs from the policy's list (in the file's order) is what watch,
// whose controllers hand over their reflectors sorted, wants too, and the
// other way round. Otherwise `plan` and `doctor` show a perpetual "rules
// differ" while watch runs, and watch reloads the anchor at every start.
func TestReflectorOrderNeverMatters(t *testing.T) {
	dir := t.TempDir()
	links := filepath.Join(dir, "links.d")
	configtest.Write(t, links, "wan", configtest.Policy{Interface: "en0", Mode: "autorate", Download: "150mbit", Upload: "15mbit",
		More: `[autorate]
reflectors = ["9.9.9.9", "2606:4700:4700::1111", "1.1.1.1", "2001:4860:4860::8888", "8.8.8.8"]
`}.TOML())
	facts := "testdata/golden/empty-mac/facts.json"
	sorted := desired.Inputs{Reflectors: map[string][]netip.Addr{"wan": {
		netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("9.9.9.9"),
		netip.MustParseAddr("2001:4860:4860::8888"), netip.MustParseAddr("2606:4700:4700::1111"),
	}}}
	for _, c := range []struct {
		name        string
		first, then desired.Inputs
	}{
		{"one-shot apply, then watch", desired.Inputs{}, sorted},
		{"watch, then one-shot plan", sorted, desired.Inputs{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMac(t, pfdntest.New())
			m.converge(m.mustDesire(links, facts, c.first))
			p, err := m.backend.Plan(context.Background(), m.mustDesire(links, facts, c.then).State)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Empty() {
				t.Fatalf("the same reflectors in another order should change nothing, got:\n%s", planText(p))
			}
		})
	}
}
