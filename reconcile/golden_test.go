// SPDX-License-Identifier: Apache-2.0

package reconcile_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/plan"
)

// TestGoldenPlans pins the plan, as text and as JSON, that each case in
// testdata/golden/CASE produces: policy files (links.d), link facts
// (facts.json), an emulated Mac prepared by setup.txt, optionally a state
// file (state.json) and watch's inputs (inputs.json). Each case's README
// says what it shows. Then, unless the case is expected to fail, the plan
// is applied and must converge: a re-plan is empty and a second apply runs
// no mutating command.
func TestGoldenPlans(t *testing.T) {
	for _, dir := range golden.Glob(t, "testdata/golden/*") {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			m := newMac(t, pfdntest.New())
			m.loadCaseState(dir)
			m.runSetup(dir)
			d, derr := m.desire(filepath.Join(dir, "links.d"), filepath.Join(dir, "facts.json"), caseInputs(t, dir))

			var text bytes.Buffer
			var p plan.Plan
			var errs []error
			if derr != nil {
				for _, e := range derr.(interface{ Unwrap() []error }).Unwrap() {
					errs = append(errs, e)
					fmt.Fprintf(&text, "Error: %v\n", e)
				}
			} else {
				var perr error
				p, perr = m.backend.Plan(context.Background(), d.State)
				p.Warnings = append(d.Warnings, p.Warnings...)
				plan.WriteText(&text, p, plan.TextOptions{ShowCommands: true, DryRun: true, Symbols: true,
					SharedGroup: m.backend.Info().SharedGroup, Subject: "Live pf/dummynet state matches links.d."})
				if perr != nil {
					errs = append(errs, perr)
					fmt.Fprintf(&text, "\nError: %v\n", perr)
				}
			}
			var js bytes.Buffer
			if err := plan.WriteJSON(&js, p, true, false, errs); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join(dir, "plan.txt"), text.Bytes(), "")
			golden.Check(t, filepath.Join(dir, "plan.json"), js.Bytes(), "")

			switch {
			case derr != nil:
				if _, err := os.Stat(filepath.Join(dir, "setup.txt")); err == nil || !p.Empty() {
					t.Fatal("a case whose desired.Desired fails must start from a clean Mac")
				}
			case isBlocked(errs0(errs)):
				// Apply refuses; restoring the hook (as the person would,
				// following the message) makes it converge.
				if _, _, err := m.apply(d); !isBlocked(err) {
					t.Fatalf("apply without the hook: %v, want it blocked", err)
				}
				if mc := m.emu.MutatingCalls(); len(mc) > 0 {
					t.Fatalf("apply without the hook ran %q", mc[0].Argv)
				}
			default:
				m.converge(d)
			}
		})
	}
}

func errs0(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

func isBlocked(err error) bool {
	_, ok := backend.Blocked(err)
	return ok
}
