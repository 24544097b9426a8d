// SPDX-License-Identifier: Apache-2.0

package reconcile_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/session"
	"github.com/macake/macake/state"
)

// mac is an emulated Mac driven through the reconcile package exactly as
// the commands drive a real one: policies and facts from files, Desired,
// the pf backend's Plan, Apply, with the state file on disk.
type mac struct {
	t       testing.TB
	emu     *pfdntest.Emulator
	tokens  *state.File
	backend backend.Backend
}

func newMac(t testing.TB, emu *pfdntest.Emulator) *mac {
	t.Helper()
	return newMacIn(t, emu, t.TempDir(), settings.Daemon{})
}

func newMacIn(t testing.TB, emu *pfdntest.Emulator, stateDir string, settings settings.Daemon) *mac {
	t.Helper()
	st, err := state.Load(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	tokens := &state.File{Dir: stateDir, State: st}
	b, err := backend.Open(backend.Config{
		Settings: session.BackendSettings(settings), Store: tokens, Runner: emu, GOOS: "darwin",
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	return &mac{t: t, emu: emu, tokens: tokens, backend: b}
}

// desire runs the first three steps of a pass: policies, facts, Desired.
func (m *mac) desire(linksDir, factsFile string, in desired.Inputs) (desired.Desire, error) {
	m.t.Helper()
	pol, err := settings.LoadPolicies(linksDir, config.LoadOptions{SkipOwnershipCheck: true})
	if err != nil {
		m.t.Fatalf("policies in %s: %v", linksDir, err)
	}
	facts, err := (&linkfacts.FileSource{Path: factsFile}).Facts(context.Background())
	if err != nil {
		m.t.Fatal(err)
	}
	in.State = m.tokens.State
	be := desired.BackendFactsOf(m.backend.Info())
	d, err := desired.Desired(pol.Links, facts, in, be)
	if err == nil && d.AllocatesSlots(in.State) {
		// As the commands do: new slots go to the interfaces' live ones
		// and never to a slot another tool's pipes occupy.
		use, err := m.backend.(backend.SlotReader).LiveSlots(context.Background())
		if err != nil {
			m.t.Fatal(err)
		}
		be.LiveSlots, be.ForeignSlots = use.Interfaces, use.Foreign
		return desired.Desired(pol.Links, facts, in, be)
	}
	return d, err
}

func (m *mac) mustDesire(linksDir, factsFile string, in desired.Inputs) desired.Desire {
	m.t.Helper()
	d, err := m.desire(linksDir, factsFile, in)
	if err != nil {
		m.t.Fatal(err)
	}
	return d
}

// apply runs the rest of a pass as `macake apply` does: plan, save the
// new slots (before anything changes), apply, and release the slots of
// removed links once everything applied.
func (m *mac) apply(d desired.Desire) (plan.Plan, reconcile.Applied, error) {
	m.t.Helper()
	p, err := m.backend.Plan(context.Background(), d.State)
	if err != nil {
		return p, reconcile.Applied{}, err
	}
	if err := m.tokens.Update(func(s *state.State) { s.Slots = d.Slots }); err != nil {
		m.t.Fatal(err)
	}
	a, err := reconcile.Apply(context.Background(), m.backend, p, nil)
	if err == nil {
		if err := m.tokens.ReleaseSlots(d.Released); err != nil {
			m.t.Fatal(err)
		}
	}
	return p, a, err
}

// converge applies d and checks the level-triggered promises: a re-plan
// is empty, and a second apply runs no mutating command.
func (m *mac) converge(d desired.Desire) plan.Plan {
	m.t.Helper()
	p, _, err := m.apply(d)
	if err != nil {
		m.t.Fatalf("apply: %v", err)
	}
	m.assertConverged(d)
	return p
}

func (m *mac) assertConverged(d desired.Desire) {
	m.t.Helper()
	again, err := m.backend.Plan(context.Background(), d.State)
	if err != nil {
		m.t.Fatalf("re-plan: %v", err)
	}
	if !again.Empty() {
		m.t.Fatalf("re-plan after apply is not empty:\n%s", planText(again))
	}
	m.emu.ResetCalls()
	if _, _, err := m.apply(d); err != nil {
		m.t.Fatalf("second apply: %v", err)
	}
	if mc := m.emu.MutatingCalls(); len(mc) > 0 {
		m.t.Fatalf("second apply ran %d mutating commands, first %q", len(mc), mc[0].Argv)
	}
}

func planText(p plan.Plan) string {
	var b strings.Builder
	plan.WriteText(&b, p, plan.TextOptions{ShowCommands: true, SharedGroup: "pf"})
	return b.String()
}

// runSetup prepares the emulated Mac from a case's setup.txt, one step a
// line ('#' starts a comment):
//
//	apply LINKS FACTS                 a full pass with those policies and facts
//	apply-failing-at N LINKS FACTS    the same, its Nth mutating command failing
//	foreign TOOL ARGS…                another tool runs pfctl or dnctl
//	rules ANCHOR RULE…                another tool loads RULE into ANCHOR
//	reference PID PROCESS             a daemon takes a pf enable reference
//	disable-pf | drop-hook | reboot | delete-pipe N | delete-anchor PATH
func (m *mac) runSetup(dir string) {
	m.t.Helper()
	f, err := os.Open(filepath.Join(dir, "setup.txt"))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		m.t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		w := strings.Fields(line)
		bad := func() { m.t.Fatalf("%s/setup.txt:%d: cannot read %q", dir, n, line) }
		switch w[0] {
		case "apply":
			if len(w) != 3 {
				bad()
			}
			if _, _, err := m.apply(m.mustDesire(filepath.Join(dir, w[1]), filepath.Join(dir, w[2]), desired.Inputs{})); err != nil {
				m.t.Fatalf("%s/setup.txt:%d: %v", dir, n, err)
			}
		case "apply-failing-at":
			k, err := strconv.Atoi(w[1])
			if len(w) != 4 || err != nil {
				bad()
			}
			if err := m.emu.AddFault(pfdntest.Fault{MutatingOnly: true, Nth: k, Kind: pfdntest.Fail}); err != nil {
				m.t.Fatal(err)
			}
			if _, _, err := m.apply(m.mustDesire(filepath.Join(dir, w[2]), filepath.Join(dir, w[3]), desired.Inputs{})); err == nil {
				m.t.Fatalf("%s/setup.txt:%d: the apply did not fail", dir, n)
			}
			m.emu.ClearFaults()
		case "foreign":
			res, err := m.emu.Foreign(ctx, "", w[1:]...)
			if err != nil || res.ExitCode != 0 {
				m.t.Fatalf("%s/setup.txt:%d: %v exit %d %s", dir, n, err, res.ExitCode, res.Stderr)
			}
		case "rules":
			res, err := m.emu.Foreign(ctx, strings.Join(w[2:], " ")+"\n", "pfctl", "-a", w[1], "-f", "-")
			if err != nil || res.ExitCode != 0 {
				m.t.Fatalf("%s/setup.txt:%d: %v exit %d %s", dir, n, err, res.ExitCode, res.Stderr)
			}
		case "reference":
			pid, err := strconv.Atoi(w[1])
			if len(w) != 3 || err != nil {
				bad()
			}
			m.emu.TakeReference(pid, w[2])
		case "disable-pf":
			m.emu.DisablePF()
		case "drop-hook":
			m.emu.DropHook()
		case "reboot":
			m.emu.Reboot()
		case "delete-pipe":
			k, err := strconv.Atoi(w[1])
			if err != nil {
				bad()
			}
			m.emu.DeletePipe(k)
		case "delete-anchor":
			m.emu.DeleteAnchor(w[1])
		default:
			bad()
		}
	}
	if err := sc.Err(); err != nil {
		m.t.Fatal(err)
	}
	m.emu.ResetCalls()
}

// caseInputs reads a case's inputs.json (watch's inputs), if any.
func caseInputs(t testing.TB, dir string) desired.Inputs {
	var in struct {
		Engaged map[string]bool `json:"engaged"`
		Rates   map[string]struct {
			Upload   int64 `json:"upload_bits_per_second"`
			Download int64 `json:"download_bits_per_second"`
		} `json:"rates"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "inputs.json"))
	if errors.Is(err, os.ErrNotExist) {
		return desired.Inputs{}
	}
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil {
		t.Fatal(err)
	}
	rates := map[string]desired.Rates{}
	for link, r := range in.Rates {
		rates[link] = desired.Rates{Upload: r.Upload, Download: r.Download}
	}
	return desired.Inputs{Engaged: in.Engaged, Rates: rates}
}

// caseState loads a case's state.json into the Mac's state, if any.
func (m *mac) loadCaseState(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		err = json.Unmarshal(b, m.tokens.State)
	}
	if err != nil {
		m.t.Fatal(err)
	}
}
