// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/reconcile"
)

// twoLinkFacts: Starlink on en0 and an LTE stick on en5, both up.
const twoLinkFacts = `{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01"},{"name":"en5","up":true,"gateway_ip":"10.64.0.1"}]}`

func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// mustLack fails the test for each of nots that text has.
func mustLack(t *testing.T, what, text string, nots ...string) {
	t.Helper()
	for _, n := range nots {
		if strings.Contains(text, n) {
			t.Errorf("%s has %q:\n%s", what, n, text)
		}
	}
}

// TestPlanOutThenApplyFile: the saved plan is shown when made, changes
// nothing then, and `apply FILE` applies exactly it; the system then
// matches the policies, and the same file cannot be applied twice (the
// live state it was made against is gone).
func TestPlanOutThenApplyFile(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	file := filepath.Join(t.TempDir(), "reviewed.plan")
	stdout, _ := r.mustRun(exitcode.OK, "plan", "--out", file)
	mustContain(t, "plan --out", stdout, `+ pipe 48001 "starlink/upload"`, "Plan: 4 to create", "Saved the plan to "+file,
		// The command repeats the directories it was made with (issue
		// 27, item 10).
		"sudo macake --config-dir "+r.configDir+" --state-dir "+r.stateDir+" apply "+file)
	if n := len(r.emu.MutatingCalls()); n != 0 {
		t.Fatalf("plan --out changed the system (%d calls)", n)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved plan: %v, mode %v; want 0600 (root runs its commands)", err, fi.Mode())
	}

	stdout, stderr := r.mustRun(exitcode.OK, "apply", file)
	mustContain(t, "apply FILE", stderr, "Reading saved plan "+file)
	mustContain(t, "apply FILE", stdout, `+ pipe 48001 "starlink/upload"`, "Applied: 4 created, 0 updated, 0 removed")
	stdout, _ = r.mustRun(exitcode.OK, "plan")
	mustContain(t, "plan after apply FILE", stdout, "No changes.")

	// Applying it again: the pipes it would create exist now. One line
	// says so, as terraform's "Saved plan is stale", not one for each of
	// its ops and one for the slots it saved (issue 27, item 14).
	code, _, stderr := r.run("apply", file)
	if code != exitcode.Failure {
		t.Fatalf("second apply of the same plan: exit %d, want 1\n%s", code, stderr)
	}
	mustContain(t, "second apply FILE", stderr, "no longer fits", "  - it was applied already: the live state and the state file are what it makes\n", "nothing was changed")
	if n := strings.Count(stderr, "\n  - "); n != 1 {
		t.Errorf("second apply FILE: %d findings, want 1:\n%s", n, stderr)
	}
}

// TestApplyFileRefusesWhatChanged: each input of a saved plan, changed
// after it was made, makes apply refuse (exit 1) with what changed, and
// change nothing.
func TestApplyFileRefusesWhatChanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *rig)
		want   []string
	}{
		{"policy edited", func(r *rig) {
			os.WriteFile(filepath.Join(r.configDir, "starlink.toml"), []byte(strings.Replace(starlinkPolicy, "150mbit", "200mbit", 1)), 0o644)
		}, []string{"starlink.toml changed"}},
		{"policy added", func(r *rig) {
			os.WriteFile(filepath.Join(r.configDir, "lte.toml"), []byte(ltePolicy), 0o644)
		}, []string{"lte.toml was added"}},
		{"policy removed", func(r *rig) { os.Remove(filepath.Join(r.configDir, "travel.toml")) }, []string{"travel.toml was removed"}},
		{"settings added", func(r *rig) {
			os.WriteFile(filepath.Join(filepath.Dir(r.configDir), "macake.toml"), []byte("log_format = \"json\"\n"), 0o644)
		}, []string{"macake.toml was added"}},
		{"network changed", func(r *rig) { r.setFacts(cableFacts) }, []string{"the network changed: en0 was"}},
		{"live state changed", func(r *rig) {
			r.emu.Foreign(context.Background(), "", "dnctl", "pipe", "48002", "config", "bw", "1000Kbit/s", "queue", "50Kbytes")
		}, []string{"the live state changed: 1 change of the plan no longer fits it ('~ pipe 48002", `pipe 48002 "starlink/download"`}},
		{"live state taken down", func(r *rig) {
			r.emu.Foreign(context.Background(), "", "dnctl", "-q", "flush")
		}, []string{"the live state changed: 1 change of the plan no longer fits it", "and it now needs 2 others ('+ pipe 48001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, map[string]string{"starlink": starlinkPolicy, "travel": travelPolicy}, starlinkFacts)
			r.mustRun(exitcode.OK, "apply")
			// A reviewed change: a faster download.
			r.setPolicies(map[string]string{"starlink": strings.Replace(starlinkPolicy, "150mbit", "180mbit", 1), "travel": travelPolicy})
			file := filepath.Join(t.TempDir(), "p")
			stdout, _ := r.mustRun(exitcode.OK, "plan", "--out", file)
			mustContain(t, "plan --out", stdout, "~ pipe 48002", "Plan: 0 to create, 1 to update")
			tc.change(r)
			before := r.emu.Snapshot().String()
			code, _, stderr := r.run("apply", file)
			if code != exitcode.Failure {
				t.Fatalf("apply FILE after %s: exit %d, want 1\n%s", tc.name, code, stderr)
			}
			mustContain(t, "refusal", stderr, append(tc.want, "no longer fits what it was made from; nothing was changed", "macake --config-dir "+r.configDir+" --state-dir "+r.stateDir+" plan --out FILE")...)
			if after := r.emu.Snapshot().String(); after != before {
				t.Errorf("a refused plan changed the system:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
}

// TestApplyFileIsExactlyThePlan: what apply FILE runs is the saved
// plan's commands, each of them, in order, and nothing else (pipe
// configurations batched into one dnctl, as every apply sends them).
func TestApplyFileIsExactlyThePlan(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	file := filepath.Join(t.TempDir(), "p")
	r.mustRun(exitcode.OK, "plan", "--out", file)
	saved, err := reconcile.ReadSavedPlan(file)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, op := range saved.Plan.Ops {
		for _, c := range op.Commands {
			want = append(want, strings.Join(c.Argv, " ")+" <<"+c.Stdin)
		}
	}
	r.emu.ResetCalls()
	r.mustRun(exitcode.OK, "apply", file)
	var ran []string
	for _, c := range r.emu.MutatingCalls() {
		// Pipe configurations are sent to one dnctl as a batch: each line
		// of it is one of the plan's dnctl commands.
		if len(c.Argv) == 2 && c.Argv[1] == "/dev/stdin" {
			for _, line := range strings.Split(strings.TrimSpace(c.Stdin), "\n") {
				ran = append(ran, c.Argv[0]+" "+line+" <<")
			}
			continue
		}
		ran = append(ran, strings.Join(c.Argv, " ")+" <<"+c.Stdin)
	}
	if len(want) == 0 || strings.Join(ran, "\n") != strings.Join(want, "\n") {
		t.Errorf("apply FILE ran\n%s\nthe saved plan says\n%s", strings.Join(ran, "\n"), strings.Join(want, "\n"))
	}
}

func TestSavedPlanUsage(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	file := filepath.Join(t.TempDir(), "p")
	for _, args := range [][]string{
		{"apply", "--out", file},              // --out only plans
		{"apply", "--link", "starlink", file}, // the file has its own scope
		{"apply", "a", "b"},
		{"plan", file}, // plan saves with --out
	} {
		if code, _, stderr := r.run(args...); code != exitcode.Usage || stderr == "" {
			t.Errorf("macake %v: exit %d, stderr %q; want 64 and a message", args, code, stderr)
		}
	}
	os.WriteFile(file, []byte("not a plan"), 0o600)
	code, _, stderr := r.run("apply", file)
	if code != exitcode.Failure || !strings.Contains(stderr, "is not a saved plan") {
		t.Errorf("apply of a file that is no plan: exit %d, %q", code, stderr)
	}
	// Without root on macOS the live state is unreadable: nothing to
	// fingerprint, so nothing is saved.
	code, _, stderr = r.runAs(501, "plan", "--out", file)
	if code == exitcode.OK || !strings.Contains(stderr, "needs root") {
		t.Errorf("plan --out without root: exit %d, %q; want a refusal saying it needs root", code, stderr)
	}
}

// TestApplyAndDownOneLink: with two links live, --link changes one and
// leaves the other's pipes and rules exactly as they are, though both
// links share pf's anchor.
func TestApplyAndDownOneLink(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "lte": ltePolicy}, twoLinkFacts)
	r.mustRun(exitcode.OK, "apply")
	snap := r.emu.Snapshot()
	if len(snap.Pipes) != 4 {
		t.Fatalf("two links, %d pipes:\n%s", len(snap.Pipes), snap)
	}
	// Slots go by name: lte has 48001/48002, starlink 48003/48004.
	lteUp := snap.Pipes[48001]

	// Both policies edited; apply only starlink's edit.
	r.setPolicies(map[string]string{
		"starlink": strings.Replace(starlinkPolicy, "150mbit", "180mbit", 1),
		"lte":      strings.Replace(strings.Replace(ltePolicy, "30mbit", "40mbit", 1), "en5", "en5", 1) + "[autorate]\nreflectors = [\"8.8.8.8\"]\n",
	})
	stdout, _ := r.mustRun(exitcode.OK, "apply", "--link", "starlink")
	mustContain(t, "apply --link starlink", stdout, `~ pipe 48004 "starlink/download"`, "Plan: 0 to create, 1 to update")
	if strings.Contains(stdout, "lte") {
		t.Errorf("apply --link starlink touched lte:\n%s", stdout)
	}
	if got := r.emu.Snapshot().Pipes[48001]; got != lteUp {
		t.Errorf("lte's upload pipe changed: %q -> %q", lteUp, got)
	}
	stdout, _ = r.mustRun(exitcode.OK, "plan")
	mustContain(t, "plan after apply --link starlink", stdout, `~ pipe 48002 "lte/download"`, "rules for lte (en5)  14 rules -> 4 rules")
	if strings.Contains(stdout, `"starlink/`) {
		t.Errorf("starlink still differs after apply --link starlink:\n%s", stdout)
	}
	stdout, _ = r.mustRun(exitcode.OK, "apply", "--link", "lte")
	mustContain(t, "apply --link lte", stdout, `~ pipe 48002 "lte/download"`, "rules for lte (en5)  14 rules -> 4 rules")
	stdout, _ = r.mustRun(exitcode.OK, "plan")
	mustContain(t, "plan after both", stdout, "No changes.")

	// down --link removes one link; the other keeps shaping, and the pf
	// reference stays until nothing is left.
	stdout, _ = r.mustRun(exitcode.OK, "down", "--link", "lte")
	mustContain(t, "down --link lte", stdout, `- pipe 48001 "lte/upload"`, `- pipe 48002 "lte/download"`, "Plan: 0 to create, 1 to update, 2 to remove")
	snap = r.emu.Snapshot()
	if _, ok := snap.Pipes[48003]; !ok || len(snap.Pipes) != 2 || !snap.PFEnabled || snap.RefCount == 0 {
		t.Fatalf("after down --link lte: %s", snap)
	}
	for _, rules := range snap.Rulesets {
		if strings.Contains(rules, "en5") {
			t.Errorf("lte's rules are still live:\n%s", rules)
		}
	}
	stdout, _ = r.mustRun(exitcode.OK, "down", "--link", "lte")
	mustContain(t, "second down --link lte", stdout, "holds no pipe slot for link \"lte\"")
	stdout, _ = r.mustRun(exitcode.OK, "down", "--link", "starlink")
	mustContain(t, "down --link starlink", stdout, "pf enable reference")
	if snap := r.emu.Snapshot(); len(snap.Pipes) != 0 || snap.RefCount != 0 {
		t.Errorf("after both links went: %s", snap)
	}
	// The next apply shapes both again from their policy files.
	r.mustRun(exitcode.OK, "apply")
	if n := len(r.emu.Snapshot().Pipes); n != 4 {
		t.Errorf("apply after down --link: %d pipes, want 4", n)
	}
}

// TestLinkScopeKeepsOtherLinksProblemsOut: --link works while another
// policy cannot be worked out (an "auto" rate without a measurement),
// and names an unknown link instead of doing nothing quietly.
func TestLinkScopeKeepsOtherLinksProblemsOut(t *testing.T) {
	auto := strings.Replace(ltePolicy, `download = "30mbit"`, `download = "auto"`, 1)
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "lte": auto}, twoLinkFacts)
	if code, _, stderr := r.run("apply"); code != exitcode.Unavailable {
		t.Fatalf("apply with an unmeasured auto rate: exit %d, want 69\n%s", code, stderr)
	}
	stdout, _ := r.mustRun(exitcode.OK, "apply", "--link", "starlink")
	mustContain(t, "apply --link starlink", stdout, `+ pipe 48001 "starlink/upload"`)
	code, _, stderr := r.run("apply", "--link", "nosuch")
	if code != exitcode.Config || !strings.Contains(stderr, `no link "nosuch"`) {
		t.Errorf("apply --link nosuch: exit %d, %q", code, stderr)
	}
}

// TestPlanOutOneLink: a saved plan keeps its scope.
func TestPlanOutOneLink(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "lte": ltePolicy}, twoLinkFacts)
	file := filepath.Join(t.TempDir(), "p")
	stdout, _ := r.mustRun(exitcode.OK, "plan", "--link", "lte", "--out", file)
	if strings.Contains(stdout, "starlink") {
		t.Errorf("plan --link lte shows starlink:\n%s", stdout)
	}
	_, stderr := r.mustRun(exitcode.OK, "apply", file)
	mustContain(t, "apply FILE", stderr, "for link lte alone")
	snap := r.emu.Snapshot()
	if len(snap.Pipes) != 2 {
		t.Errorf("the saved plan for lte made %d pipes:\n%s", len(snap.Pipes), snap)
	}
}
