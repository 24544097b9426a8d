// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
)

// restart replaces the harness's backend with a new one on the same
// emulator and token store: the next macake process, reading the state
// file the killed one left.
func (h *harness) restart() {
	h.t.Helper()
	opts := pfdn.DefaultOptions()
	opts.KnownLinks = func() map[string]int { return maps.Clone(h.known) }
	b, err := pfdn.New(h.e, h.tokens, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.b = b
}

// TestConvergesAfterAKillAtEveryStep kills macake (pfdntest.Kill: the
// command takes effect, macake never sees its answer) at each command of
// an apply in turn, reads included, so every gap between two steps is a
// crash point. The next process's down must leave the Mac as macake found
// it, pf reference included (issue 12: a kill right after `pfctl -E`
// leaked the reference for good), and so must an apply and then a down.
func TestConvergesAfterAKillAtEveryStep(t *testing.T) {
	ctx := context.Background()
	for _, s := range startStates {
		probe, _ := s.setup(ctx, t)
		if _, err := probe.apply(ctx, wanLTE); err != nil {
			t.Fatal(err)
		}
		calls := len(probe.e.Calls())
		for step := 1; step <= calls; step++ {
			for _, then := range []string{"down", "apply-then-down"} {
				t.Run(fmt.Sprintf("%s/kill-%d/%s", s.name, step, then), func(t *testing.T) {
					h, baseline := s.setup(ctx, t)
					h.e.AddFault(pfdntest.Fault{Nth: step, Kind: pfdntest.Kill})
					if _, err := h.apply(ctx, wanLTE, previousConfig); err == nil {
						t.Fatalf("call %d was killed, yet the apply reports success", step)
					}
					h.e.ClearFaults()
					h.restart()
					if then == "apply-then-down" {
						h.converge(ctx, wanLTE)
						h.checkShaped(wanLTE)
					}
					h.teardown(ctx, baseline)
				})
			}
		}
	}
}

// TestKilledEnableIsRecovered is issue 12's reproduction: pf off, macake
// killed while `pfctl -E` runs. The next plan adopts the token pf took
// (one enable reference, not two), and down releases it.
func TestKilledEnableIsRecovered(t *testing.T) {
	ctx := context.Background()
	h, baseline := startStates[0].setup(ctx, t)
	h.e.AddFault(pfdntest.Fault{Match: `^pfctl -E$`, Nth: 1, Kind: pfdntest.Kill})
	if _, err := h.apply(ctx, wanLTE); err == nil {
		t.Fatal("the killed pfctl -E reported success")
	}
	h.e.ClearFaults()
	if h.tokens.PFToken() != "" {
		t.Fatal("the killed run saved a token it never saw")
	}
	if _, pending := h.tokens.EnableIntent(); !pending {
		t.Fatal("no intent was recorded before pfctl -E")
	}
	h.restart()
	h.e.ResetCalls()
	h.converge(ctx, wanLTE)
	for _, c := range h.e.MutatingCalls() {
		if strings.Join(c.Argv, " ") == "/sbin/pfctl -E" {
			t.Errorf("the next apply took a second pf reference")
		}
	}
	if got := h.e.Snapshot().RefCount; got != 1 {
		t.Errorf("pf has %d references after the recovery, want macake's one", got)
	}
	if _, pending := h.tokens.EnableIntent(); pending {
		t.Error("the intent outlived the recovery")
	}
	h.teardown(ctx, baseline)
}

// TestRecoveryNeverAdoptsAnotherToolsReference: only a token pfctl took
// after the intent and that was not held before is macake's. A reference
// another tool held already, one taken by a daemon, one taken by pfctl
// long before, or two candidates at once are never adopted.
func TestRecoveryNeverAdoptsAnotherToolsReference(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		before  func(e *pfdntest.Emulator) // before the intent
		after   func(e *pfdntest.Emulator) // after the intent, instead of macake's pfctl -E
		warning string
	}{
		{name: "a daemon's reference", after: func(e *pfdntest.Emulator) { e.TakeReference(300, "socketfilterfw") }},
		{name: "pfctl's reference held before", before: func(e *pfdntest.Emulator) { foreignEnable(t, e) }},
		{name: "two candidates", after: func(e *pfdntest.Emulator) { foreignEnable(t, e); foreignEnable(t, e) }, warning: "cannot tell which one is its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, nil)
				if tc.before != nil {
					tc.before(h.e)
				}
				// The intent is recorded as a real run would, then pfctl -E
				// fails without effect: nothing of macake's is live.
				h.e.AddFault(pfdntest.Fault{Match: `^pfctl -E$`, Nth: 1, Kind: pfdntest.Fail})
				if _, err := h.apply(ctx, wanLTE); err == nil {
					t.Fatal("the failed pfctl -E reported success")
				}
				h.e.ClearFaults()
				time.Sleep(3 * time.Second)
				if tc.after != nil {
					tc.after(h.e)
				}
				refs := h.e.Snapshot().RefCount
				h.restart()
				p, err := h.b.Plan(ctx, wanLTE)
				if err != nil {
					t.Fatal(err)
				}
				if h.tokens.PFToken() != "" {
					t.Errorf("adopted %s, which is not macake's", h.tokens.PFToken())
				}
				if tc.warning != "" && !strings.Contains(listing(p), tc.warning) {
					t.Errorf("no warning %q in:\n%s", tc.warning, listing(p))
				}
				h.converge(ctx, wanLTE)
				if _, err := h.b.Teardown(ctx); err != nil {
					t.Fatal(err)
				}
				if got := h.e.Snapshot().RefCount; got != refs {
					t.Errorf("down left %d references, want the %d others hold", got, refs)
				}
			})
		})
	}
}

// foreignEnable is another tool running `pfctl -E` (and keeping the token).
func foreignEnable(t *testing.T, e *pfdntest.Emulator) {
	t.Helper()
	foreignRun(context.Background(), t, e, "", "/sbin/pfctl", "-E")
}
