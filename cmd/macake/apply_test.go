// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

// Policies used by the apply/down/links tests.
const (
	// starlinkShaping is the Starlink policy's match (en0 behind the
	// dish's router) and rates; the policies of the Starlink link add
	// their [autorate] table.
	starlinkShaping = `description = "Starlink"
[match]
interface   = "en0"
gateway_mac = "74:24:9f:00:00:01"
[shaper]
download = "150mbit"
upload   = "15mbit"
`
	starlinkPolicy = starlinkShaping + `[autorate]
reflectors = ["1.1.1.1", "9.9.9.9"]
`
	cablePolicy = `[match]
interface   = "en0"
gateway_mac = "a4:91:b1:00:00:02"
[shaper]
mode     = "fixed"
download = "450mbit"
upload   = "22mbit"
queue    = "256KB"
`
	travelPolicy = `[match]
interface = "en0"
priority  = -10
[shaper]
mode = "off"
`
	ltePolicy = `[match]
interface = "en5"
[shaper]
download = "30mbit"
upload   = "5mbit"
`
	starlinkFacts = `{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","ssid":"STARLINK"},{"name":"en5","up":true}]}`
	cableFacts    = `{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.0.1","gateway_mac":"a4:91:b1:00:00:02"}]}`
)

// rig is an emulated Mac behind the CLI: the emulator as the backend's
// runner, a policy directory, a facts file and a state directory.
type rig struct {
	t         *testing.T
	emu       *pfdntest.Emulator
	configDir string
	stateDir  string
	factsFile string
}

func newRig(t *testing.T, policies map[string]string, facts string) *rig {
	t.Helper()
	r := &rig{t: t, emu: pfdntest.New(), configDir: t.TempDir(), stateDir: filepath.Join(t.TempDir(), "state"),
		factsFile: filepath.Join(t.TempDir(), "facts.json")}
	// Not the default state directory: apply and watch create only that
	// one themselves.
	if err := os.Mkdir(r.stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	backendRunner = r.emu
	oldWait := lockWait
	lockWait = 200 * time.Millisecond
	t.Cleanup(func() { backendRunner, lockWait = nil, oldWait })
	t.Setenv(backend.EnvBackend, "pf")
	t.Setenv(linkfacts.EnvFile, r.factsFile)
	t.Setenv("NO_COLOR", "")
	r.setPolicies(policies)
	r.setFacts(facts)
	return r
}

func (r *rig) setPolicies(policies map[string]string) {
	r.t.Helper()
	entries, _ := os.ReadDir(r.configDir)
	for _, e := range entries {
		os.Remove(filepath.Join(r.configDir, e.Name()))
	}
	for name, text := range policies {
		configtest.Write(r.t, r.configDir, name, text)
	}
}

func (r *rig) setFacts(facts string) {
	r.t.Helper()
	if err := os.WriteFile(r.factsFile, []byte(facts), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// run runs macake with the rig's directories as root.
func (r *rig) run(args ...string) (int, string, string) {
	r.t.Helper()
	return r.runAs(0, args...)
}

// runAs runs macake as if the effective uid were euid. The emulated Mac
// answers as a real one does: pfctl and dnctl refuse a caller who is not
// root (reference/pf-dummynet.md items 12 and 30).
func (r *rig) runAs(euid int, args ...string) (int, string, string) {
	r.t.Helper()
	r.emu.SetPrivileged(euid == 0)
	var out, errb bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: os.Getenv, euid: func() int { return euid }}
	code := e.main(append([]string{"--config-dir", r.configDir, "--state-dir", r.stateDir}, args...))
	return code, out.String(), errb.String()
}

// mustChangeNothing fails the test if what ran any command that changes
// the emulated system.
func (r *rig) mustChangeNothing(what string) {
	r.t.Helper()
	if calls := r.emu.MutatingCalls(); len(calls) != 0 {
		r.t.Fatalf("%s changed the system: %q", what, calls[0].Argv)
	}
}

func (r *rig) mustRun(want int, args ...string) (string, string) {
	r.t.Helper()
	code, stdout, stderr := r.run(args...)
	if code != want {
		r.t.Fatalf("macake %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	return stdout, stderr
}

func TestApplyThenNoChanges(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "travel": travelPolicy}, starlinkFacts)

	stdout, stderr := r.mustRun(exitcode.OK, "plan")
	mustContain(t, "plan: stderr", stderr,
		fmt.Sprintf("Reading 2 files in %s … ok\n", r.configDir),
		`Reading live state (pf anchor "com.apple/macake", dummynet pipes 48001-48998) … ok`,
	)
	if !strings.Contains(stdout, "Plan: 4 to create, 0 to update, 0 to remove.") || strings.Contains(stdout, "Reading") {
		t.Errorf("plan: stdout:\n%s", stdout)
	}
	r.mustChangeNothing("plan")
	r.mustRun(exitcode.Changes, "plan", "--detailed-exitcode")

	stdout, _ = r.mustRun(exitcode.OK, "apply", "--show-commands")
	if !strings.Contains(stdout, "      run: /usr/sbin/dnctl pipe 48001 config bw 15000Kbit/s queue 37Kbytes") ||
		!regexpMatch(`\nApplied: 4 created, 0 updated, 0 removed \(\d+\.\d\ds\)\.\n$`, stdout) {
		t.Errorf("apply: stdout:\n%s", stdout)
	}
	snap := r.emu.Snapshot()
	if snap.Pipes[48001] == "" || snap.Pipes[48002] == "" || !snap.PFEnabled || snap.Rulesets["com.apple/macake"] == "" {
		t.Fatalf("apply did not shape:\n%s", snap)
	}
	st, err := state.Load(r.stateDir)
	if err != nil || st.PFToken == "" || st.Slots["starlink"] != 0 || len(st.Slots) != 1 {
		t.Fatalf("state after apply: %+v, %v", st, err)
	}

	r.emu.ResetCalls()
	stdout, _ = r.mustRun(exitcode.OK, "apply", "--detailed-exitcode")
	if want := fmt.Sprintf("No changes. Live pf/dummynet state matches %s.\n", r.configDir); stdout != want {
		t.Errorf("second apply: stdout %q, want %q", stdout, want)
	}
	r.mustChangeNothing("a no-op apply")
	if n := len(r.emu.Calls()); n != 5 {
		t.Errorf("a no-op apply ran %d commands, want the 5 reads", n)
	}
}

func TestApplyJSON(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	stdout, _ := r.mustRun(exitcode.OK, "apply", "--json")
	var doc plan.JSONDocument
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("apply --json printed no JSON document: %v\n%s", err, stdout)
	}
	if doc.FormatVersion != plan.JSONFormatVersion || doc.DryRun || !doc.Applied || doc.Summary.Create != 4 || len(doc.Errors) != 0 {
		t.Errorf("document: %+v", doc)
	}
	stdout, _ = r.mustRun(exitcode.OK, "plan", "--json")
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || !doc.DryRun || doc.Applied || len(doc.Changes) != 0 {
		t.Errorf("plan --json after apply: %+v, %v", doc, err)
	}
}

func TestApplyColor(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	stdout, _ := r.mustRun(exitcode.OK, "plan", "--color", "always")
	if !strings.Contains(stdout, "\x1b[32m+\x1b[0m pipe 48001") {
		t.Errorf("--color always: no green +:\n%q", stdout)
	}
	for _, args := range [][]string{{"plan"}, {"plan", "--color", "never"}} {
		if stdout, _ := r.mustRun(exitcode.OK, args...); strings.Contains(stdout, "\x1b[") {
			t.Errorf("%v wrote colour to a non-terminal: %q", args, stdout)
		}
	}
	if code, _, _ := r.run("plan", "--color", "sometimes"); code != exitcode.Usage {
		t.Errorf("--color sometimes: exit %d, want %d", code, exitcode.Usage)
	}
}

func TestApplyNeedsRootUnlessDryRun(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	for _, args := range [][]string{{"apply"}, {"down"}} {
		code, _, stderr := r.runAs(501, args...)
		if code != exitcode.NoPerm || !strings.Contains(stderr, "Run with sudo") {
			t.Errorf("%v as a user: exit %d, stderr %q", args, code, stderr)
		}
	}
	for _, args := range [][]string{{"apply", "--dry-run"}, {"plan"}, {"links"}} {
		if code, _, stderr := r.runAs(501, args...); code != exitcode.OK {
			t.Errorf("%v as a user: exit %d, stderr %q", args, code, stderr)
		}
	}
	// Which of macake's objects are live cannot be known without root on
	// a Mac, so there is no removal to show either.
	if code, _, stderr := r.runAs(501, "down", "--dry-run"); code != exitcode.Unavailable || !strings.Contains(stderr, "needs root, even for a dry run") {
		t.Errorf("down --dry-run as a user: exit %d, stderr %q", code, stderr)
	}
	r.mustChangeNothing("a user's dry run")
}

// TestDryRunWithoutRoot: pf and dummynet refuse to be read by a user, so a
// dry run says that it cannot see the live state and shows everything
// macake would own, whatever is live; as root it shows only the
// differences.
func TestDryRunWithoutRoot(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	r.mustRun(exitcode.OK, "apply")
	code, stdout, stderr := r.runAs(501, "plan")
	if code != exitcode.OK {
		t.Fatalf("plan as a user: exit %d\n%s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "Note: The live state cannot be read without root") || !strings.Contains(stdout, "Run it with sudo to see only the differences.") ||
		!strings.Contains(stdout, `+ pipe 48002 "starlink/download"`) || !strings.Contains(stdout, "Plan: 4 to create, 0 to update, 0 to remove.") {
		t.Errorf("plan as a user: stdout:\n%s", stdout)
	}
	if !strings.Contains(stderr, "… not read: it needs root\n") || strings.Contains(stderr, "failed") {
		t.Errorf("plan as a user: stderr:\n%s", stderr)
	}
	if code, _, _ := r.runAs(501, "plan", "--detailed-exitcode"); code != exitcode.Changes {
		t.Errorf("plan --detailed-exitcode as a user: exit %d, want %d", code, exitcode.Changes)
	}
	code, stdout, _ = r.runAs(501, "plan", "--json")
	var doc plan.JSONDocument
	if err := json.Unmarshal([]byte(stdout), &doc); code != exitcode.OK || err != nil || !doc.LiveStateNotRead || doc.Note == "" || doc.Summary.Create != 4 || !doc.DryRun {
		t.Errorf("plan --json as a user: exit %d, %v, %s", code, err, stdout)
	}
	// Root sees the truth: nothing to do.
	if stdout, _ := r.mustRun(exitcode.OK, "plan"); !strings.HasPrefix(stdout, "No changes.") {
		t.Errorf("plan as root after apply:\n%s", stdout)
	}
	code, stdout, _ = r.run("plan", "--json")
	if err := json.Unmarshal([]byte(stdout), &doc); code != exitcode.OK || err != nil || strings.Contains(stdout, "live_state_not_read") {
		t.Errorf("plan --json as root: exit %d, %v, %s", code, err, stdout)
	}
	// No active link: nothing macake would own, and no claim about what
	// is live.
	r.setFacts(`{"interfaces":[]}`)
	if code, stdout, _ := r.runAs(501, "plan"); code != exitcode.OK || !strings.Contains(stdout, "No policy matches the network now, so macake would own nothing in pf/dummynet.") || strings.Contains(stdout, "matches "+r.configDir) {
		t.Errorf("plan as a user with no active link: exit %d\n%s", code, stdout)
	}
}

// TestApplyRefusesBrokenPolicies: a broken file changes nothing, so the
// shaping of every other link stays exactly as it was.
func TestApplyRefusesBrokenPolicies(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "lte": ltePolicy}, starlinkFacts)
	r.mustRun(exitcode.OK, "apply")
	before := r.emu.Snapshot().String()
	r.setPolicies(map[string]string{"starlink": starlinkPolicy, "lte": strings.Replace(ltePolicy, `"30mbit"`, `"30mbps"`, 1)})
	r.emu.ResetCalls()
	code, stdout, stderr := r.run("apply")
	if code != exitcode.Config {
		t.Fatalf("exit %d, want %d\n%s", code, exitcode.Config, stderr)
	}
	if !regexpMatch(`lte\.toml:4:12: .*mbps`, stderr) || !strings.Contains(stderr, "nothing was changed") || stdout != "" {
		t.Errorf("stdout %q\nstderr:\n%s", stdout, stderr)
	}
	if n := len(r.emu.Calls()); n != 0 {
		t.Errorf("a refused apply ran %d commands", n)
	}
	if after := r.emu.Snapshot().String(); after != before {
		t.Errorf("the live state changed:\n%s", after)
	}
	code, stdout, _ = r.run("apply", "--json")
	var doc plan.JSONDocument
	if code != exitcode.Config || json.Unmarshal([]byte(stdout), &doc) != nil || len(doc.Errors) != 1 || !strings.HasSuffix(doc.Errors[0].File, "lte.toml") || doc.Errors[0].Line != 4 || doc.Errors[0].Column != 12 {
		t.Errorf("--json: exit %d, %s", code, stdout)
	}
}

// TestApplyAutoRateWithoutMeasurement: plan and apply of a valid policy
// whose "auto" rates wait for a measurement exit 69, as for a missing
// tool (the files are valid: 78 would send the user to fix them), name
// both directions in one line, and give the measure command with the
// directories they were given; a plan says nothing about changes it
// never meant to make (issue 27, items 4 and 10).
func TestApplyAutoRateWithoutMeasurement(t *testing.T) {
	auto := strings.Replace(strings.Replace(starlinkPolicy, `"150mbit"`, `"auto"`, 1), `"15mbit"`, `"auto"`, 1)
	r := newRig(t, map[string]string{"starlink": auto}, starlinkFacts)
	measure := `run "sudo macake --config-dir ` + r.configDir + ` --state-dir ` + r.stateDir + ` measure --link starlink" while on it`
	for _, cmd := range []string{"plan", "apply"} {
		code, _, stderr := r.run(cmd)
		if code != exitcode.Unavailable || !strings.Contains(stderr, `link "starlink": shaper.download and shaper.upload are "auto"`) ||
			!strings.Contains(stderr, measure) || strings.Count(stderr, `"auto"`) != 1 {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", cmd, code, exitcode.Unavailable, stderr)
		}
		if said := strings.Contains(stderr, "nothing was changed"); said != (cmd == "apply") {
			t.Errorf("%s says \"nothing was changed\": %v\n%s", cmd, said, stderr)
		}
	}
}

func TestApplyHookMissing(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	r.emu.DropHook()
	for _, args := range [][]string{{"apply"}, {"plan"}} {
		code, stdout, stderr := r.run(args...)
		if code != exitcode.Failure {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
		if !strings.Contains(stdout, "Plan: 4 to create") {
			t.Errorf("%v: the plan is still shown; stdout:\n%s", args, stdout)
		}
		if !strings.Contains(stderr, "\n    dummynet-anchor \"com.apple/*\"\n") || !strings.Contains(stderr, "/etc/pf.conf") {
			t.Errorf("%v: stderr must give the line to add:\n%s", args, stderr)
		}
	}
	r.mustChangeNothing("apply without the hook")
}

// TestApplyHookLostAfterApply: everything of macake's is live but pf's
// main ruleset lost the hook line, so nothing is shaped: apply must not
// say that all matches.
func TestApplyHookLostAfterApply(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	r.mustRun(exitcode.OK, "apply")
	r.emu.DropHook()
	for _, args := range [][]string{{"apply"}, {"plan"}} {
		code, stdout, stderr := r.run(args...)
		want := `macake's objects are in place, but pf does not evaluate them: its main ruleset lacks the line dummynet-anchor "com.apple/*"`
		if code != exitcode.Failure || !strings.Contains(stdout, want) || strings.Contains(stdout, "No changes") || strings.Contains(stdout, "matches") {
			t.Errorf("%v: exit %d, stdout lacks %q:\n%s", args, code, want, stdout)
		}
		if !strings.Contains(stderr, "\n    dummynet-anchor \"com.apple/*\"\n") {
			t.Errorf("%v: stderr must give the line to add:\n%s", args, stderr)
		}
	}
}

func TestApplyBackendUnavailable(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	backendRunner = nil
	t.Setenv("MACAKE_PFCTL", filepath.Join(t.TempDir(), "no-pfctl"))
	code, _, stderr := r.run("plan")
	if code != exitcode.Unavailable || !strings.Contains(stderr, "no-pfctl does not exist") {
		t.Errorf("missing pfctl: exit %d, stderr %s", code, stderr)
	}
	t.Setenv(backend.EnvBackend, "tc")
	t.Setenv(tc.EnvTC, filepath.Join(t.TempDir(), "no-tc"))
	code, _, stderr = r.run("apply")
	if code != exitcode.Unavailable || !strings.Contains(stderr, "no-tc does not exist") || !strings.Contains(stderr, "apt-get install iproute2") {
		t.Errorf("tc missing: exit %d, stderr %s", code, stderr)
	}
	backendRunner = r.emu
	t.Setenv(backend.EnvBackend, "pf")
	code, _, stderr = r.runAs(501, "down", "--dry-run")
	if code != exitcode.Unavailable || !strings.Contains(stderr, "Run with sudo") {
		t.Errorf("pfctl without root: exit %d, stderr %s", code, stderr)
	}
}

func TestApplyWaitsForTheLock(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	l, err := state.AcquireLock(context.Background(), r.stateDir, state.LockOptions{Wait: time.Second, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"apply"}, {"down"}} {
		code, _, stderr := r.run(args...)
		if code != exitcode.Failure || !strings.Contains(stderr, fmt.Sprintf("(pid %d)", os.Getpid())) {
			t.Errorf("%v with the lock held: exit %d, stderr %s", args, code, stderr)
		}
	}
	r.mustRun(exitcode.OK, "plan") // a dry run needs no lock
	l.Release()
	r.mustRun(exitcode.OK, "apply")
}

// TestApplyFaultAtEveryStep fails each mutating command of an apply in
// turn (before and after the command took effect): apply exits 1 naming
// the step, the next apply converges, and down then leaves the Mac exactly
// as it was before macake.
func TestApplyFaultAtEveryStep(t *testing.T) {
	scenarios := []struct {
		name             string
		before, after    map[string]string
		factsBefore, now string
	}{
		{"from nothing", nil, map[string]string{"starlink": starlinkPolicy, "lte": ltePolicy}, starlinkFacts, starlinkFacts},
		{"policy change", map[string]string{"starlink": starlinkPolicy, "lte": ltePolicy},
			map[string]string{"starlink": strings.Replace(starlinkPolicy, "150mbit", "200mbit", 1), "cable": cablePolicy}, starlinkFacts, starlinkFacts},
		{"link switch", map[string]string{"starlink": starlinkPolicy, "cable": cablePolicy, "lte": ltePolicy},
			map[string]string{"starlink": starlinkPolicy, "cable": cablePolicy}, starlinkFacts, cableFacts},
	}
	for _, sc := range scenarios {
		// How many mutating commands does the clean run take?
		probe := newRig(t, sc.before, sc.factsBefore)
		if sc.before != nil {
			probe.mustRun(exitcode.OK, "apply")
		}
		probe.setPolicies(sc.after)
		probe.setFacts(sc.now)
		probe.emu.ResetCalls()
		probe.mustRun(exitcode.OK, "apply")
		steps := probe.emu.MutatingCalls()
		if len(steps) < 2 {
			t.Fatalf("%s: only %d mutating steps", sc.name, len(steps))
		}
		t.Logf("%s: failing each of %d mutating steps in turn", sc.name, len(steps))
		for i := range steps {
			for _, afterEffect := range []bool{false, true} {
				if afterEffect && strings.HasSuffix(strings.Join(steps[i].Argv, " "), "pfctl -E") {
					// A reference taken but never reported cannot be
					// given back by anyone: nothing to test.
					continue
				}
				name := fmt.Sprintf("%s/step %d %q after-effect=%v", sc.name, i+1, strings.Join(steps[i].Argv, " "), afterEffect)
				r := newRig(t, sc.before, sc.factsBefore)
				withForeign(t, r.emu)
				pristine := r.emu.Snapshot().String()
				if sc.before != nil {
					r.mustRun(exitcode.OK, "apply")
				}
				r.setPolicies(sc.after)
				r.setFacts(sc.now)
				if err := r.emu.AddFault(pfdntest.Fault{MutatingOnly: true, Nth: i + 1, Kind: pfdntest.Fail, AfterEffect: afterEffect}); err != nil {
					t.Fatal(err)
				}
				code, _, stderr := r.run("apply")
				if code != exitcode.Failure || !strings.Contains(stderr, "injected failure") || !regexpMatch(`step \d+ of \d+ \(`, stderr) ||
					!strings.Contains(stderr, "run 'sudo macake --config-dir "+r.configDir+" --state-dir "+r.stateDir+" apply' again") {
					t.Fatalf("%s: exit %d, stderr:\n%s", name, code, stderr)
				}
				if first := strings.Contains(stderr, "Nothing was applied: it failed at the first step."); first != (i == 0) ||
					strings.Contains(stderr, "The steps before it were applied.") == (i == 0) {
					t.Fatalf("%s: what was applied before the failure is misreported:\n%s", name, stderr)
				}
				r.emu.ClearFaults()
				r.mustRun(exitcode.OK, "apply")
				if stdout, _ := r.mustRun(exitcode.OK, "plan"); !strings.HasPrefix(stdout, "No changes.") {
					t.Fatalf("%s: no convergence after the failure:\n%s", name, stdout)
				}
				r.mustRun(exitcode.OK, "down")
				if after := r.emu.Snapshot().String(); after != pristine {
					t.Fatalf("%s: after down the Mac differs from before macake:\n--- after ---\n%s--- before ---\n%s", name, after, pristine)
				}
			}
		}
	}
}

// withForeign adds other tools' objects that macake must never touch.
func withForeign(t *testing.T, emu *pfdntest.Emulator) {
	t.Helper()
	ctx := context.Background()
	if res, err := emu.Foreign(ctx, "", "dnctl", "pipe", "40269", "config", "bw", "1Mbit/s", "delay", "100"); err != nil || res.ExitCode != 0 {
		t.Fatal(err, string(res.Stderr))
	}
	if res, err := emu.Foreign(ctx, "dummynet out on en0 all pipe 40269\n", "pfctl", "-a", "com.apple/nlc", "-f", "-"); err != nil || res.ExitCode != 0 {
		t.Fatal(err, string(res.Stderr))
	}
	emu.TakeReference(118, "com.apple.InternetSharing")
}

func TestDownFaultAtEveryStep(t *testing.T) {
	policies := map[string]string{"starlink": starlinkPolicy, "lte": ltePolicy}
	probe := newRig(t, policies, starlinkFacts)
	probe.mustRun(exitcode.OK, "apply")
	probe.emu.ResetCalls()
	probe.mustRun(exitcode.OK, "down")
	steps := len(probe.emu.MutatingCalls())
	if steps != 3 {
		t.Fatalf("down took %d mutating steps, want 3 (anchor, the 4 pipes in one dnctl, reference)", steps)
	}
	for i := 1; i <= steps; i++ {
		r := newRig(t, policies, starlinkFacts)
		withForeign(t, r.emu)
		pristine := r.emu.Snapshot().String()
		r.mustRun(exitcode.OK, "apply")
		r.emu.AddFault(pfdntest.Fault{MutatingOnly: true, Nth: i, Kind: pfdntest.Fail})
		code, _, stderr := r.run("down")
		if code != exitcode.Failure || !strings.Contains(stderr, "injected failure") || !strings.Contains(stderr, "Run 'macake down' again") {
			t.Fatalf("down failing at step %d: exit %d, stderr:\n%s", i, code, stderr)
		}
		r.emu.ClearFaults()
		r.mustRun(exitcode.OK, "down")
		if after := r.emu.Snapshot().String(); after != pristine {
			t.Fatalf("step %d: after down the Mac differs from before macake:\n--- after ---\n%s--- before ---\n%s", i, after, pristine)
		}
	}
}

func TestDownTwiceAndWithoutState(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "lte": ltePolicy}, starlinkFacts)
	pristine := r.emu.Snapshot().String()
	r.mustRun(exitcode.OK, "apply")
	stdout, _ := r.mustRun(exitcode.OK, "down")
	if !strings.Contains(stdout, "Plan: 0 to create, 0 to update, 6 to remove.") || !strings.Contains(stdout, "Applied: 0 created, 0 updated, 6 removed") {
		t.Errorf("down: stdout:\n%s", stdout)
	}
	if after := r.emu.Snapshot().String(); after != pristine {
		t.Errorf("after down:\n%s\nwant\n%s", after, pristine)
	}
	stdout, _ = r.mustRun(exitcode.OK, "down")
	if stdout != "No changes. macake owns nothing in pf/dummynet.\n" {
		t.Errorf("second down: %q", stdout)
	}
	st, _ := state.Load(r.stateDir)
	if st.PFToken != "" || len(st.Slots) != 0 {
		t.Errorf("state after down: %+v", st)
	}

	// A corrupt state file: the pipes and rules still go (the anchor's
	// rules identify them); only the lost token's reference cannot be
	// given back, and down says the file was corrupt.
	r.mustRun(exitcode.OK, "apply")
	if err := os.WriteFile(state.Path(r.stateDir), []byte("{garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr := r.mustRun(exitcode.OK, "down")
	if !strings.Contains(stderr, "state file is corrupt") {
		t.Errorf("no warning about the corrupt state file:\n%s", stderr)
	}
	snap := r.emu.Snapshot()
	if len(snap.Pipes) != 0 || snap.Rulesets["com.apple/macake"] != "" {
		t.Errorf("down with a corrupt state left owned objects:\n%s", snap)
	}

	// No state file at all: apply rebuilds the slots from the live rules,
	// so no pipe is renumbered (only the lost pf reference is taken anew),
	// and down still removes everything.
	r.emu.Reboot()
	r.mustRun(exitcode.OK, "apply")
	os.Remove(state.Path(r.stateDir))
	if stdout, _ := r.mustRun(exitcode.OK, "apply"); !strings.Contains(stdout, "Plan: 1 to create, 0 to update, 0 to remove.") || !strings.Contains(stdout, "+ pf enable reference") {
		t.Errorf("apply after losing the state file must keep the pipes:\n%s", stdout)
	}
	if st, _ := state.Load(r.stateDir); st.Slots["lte"] != 0 || st.Slots["starlink"] != 1 {
		t.Errorf("slots rebuilt as %v, want lte 0 and starlink 1 as live", st.Slots)
	}
	os.Remove(state.Path(r.stateDir))
	r.mustRun(exitcode.OK, "down")
	if snap := r.emu.Snapshot(); len(snap.Pipes) != 0 || snap.Rulesets["com.apple/macake"] != "" {
		t.Errorf("down without a state file left owned objects:\n%s", snap)
	}
}

// TestCorruptStateKeepsThePFToken: a corrupt state file whose pf_token
// still reads is moved aside, and down releases macake's pf reference with
// the recovered token instead of leaking it.
func TestCorruptStateKeepsThePFToken(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	r.emu.TakeReference(300, "socketfilterfw")
	pristine := r.emu.Snapshot().String()
	r.mustRun(exitcode.OK, "apply")
	st, _ := state.Load(r.stateDir)
	torn := fmt.Sprintf(`{"version": 1, "pf_token": %q, "slots": {"starl`, st.PFToken)
	if err := os.WriteFile(state.Path(r.stateDir), []byte(torn), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr := r.mustRun(exitcode.OK, "down")
	if !strings.Contains(stderr, "pf token "+st.PFToken+" was recovered") || !strings.Contains(stderr, "kept in "+state.Path(r.stateDir)+state.CorruptSuffix) {
		t.Errorf("down must report the recovered token and where the file went:\n%s", stderr)
	}
	if after := r.emu.Snapshot().String(); after != pristine {
		t.Errorf("after down (the reference must be released too):\n%s\nwant\n%s", after, pristine)
	}
	if b, err := os.ReadFile(state.Path(r.stateDir) + state.CorruptSuffix); err != nil || string(b) != torn {
		t.Errorf("the corrupt file was not kept: %q, %v", b, err)
	}
}

// TestPlanNamesItself: `plan` is apply --dry-run, and its messages say
// plan, the command that was run.
func TestPlanNamesItself(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": strings.Replace(starlinkPolicy, `"150mbit"`, `"150mbps"`, 1)}, starlinkFacts)
	code, _, stderr := r.run("plan")
	if code != exitcode.Config || !strings.Contains(stderr, "macake plan: ") || strings.Contains(stderr, "macake apply:") {
		t.Errorf("plan with a broken file: exit %d\n%s", code, stderr)
	}
}

// TestCorruptStateTokenSurvivesAFailedRun: a run that stops before it
// writes the rebuilt state (here apply, on a Mac whose hook line went)
// must not lose the pf token it salvaged: the next down still gives the
// reference back.
func TestCorruptStateTokenSurvivesAFailedRun(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	r.emu.TakeReference(300, "socketfilterfw")
	r.mustRun(exitcode.OK, "apply")
	st, _ := state.Load(r.stateDir)
	torn := fmt.Sprintf(`{"version": 1, "pf_token": %q, "slots": {"starl`, st.PFToken)
	if err := os.WriteFile(state.Path(r.stateDir), []byte(torn), 0o644); err != nil {
		t.Fatal(err)
	}
	r.emu.DropHook()
	withoutHook := r.emu.Snapshot()
	if code, _, _ := r.run("apply"); code == exitcode.OK {
		t.Fatal("apply without the hook line succeeded")
	}
	r.mustRun(exitcode.OK, "down")
	if after := r.emu.Snapshot(); after.RefCount != withoutHook.RefCount-1 {
		t.Errorf("down after a failed run left %d pf references, want %d (macake's given back):\n%s", after.RefCount, withoutHook.RefCount-1, after)
	}
}

// TestStateDirOwnershipIsChecked: as root, a state directory others can
// write is refused (anyone could plant a pf token or slots in it) with the
// path and the fix, and nothing is changed.
func TestStateDirOwnershipIsChecked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the check wants a root-owned directory (CI runs as root)")
	}
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	if err := os.MkdirAll(r.stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(r.stateDir, 0o777)
	pristine := r.emu.Snapshot().String()
	for _, cmd := range []string{"apply", "down"} {
		code, _, stderr := r.run(cmd)
		if code != exitcode.Failure || !strings.Contains(stderr, r.stateDir) || !strings.Contains(stderr, "writable by group or others (mode 0777)") ||
			!strings.Contains(stderr, "sudo chmod go-w "+r.stateDir) {
			t.Errorf("%s with a world-writable state dir: exit %d\n%s", cmd, code, stderr)
		}
	}
	if after := r.emu.Snapshot().String(); after != pristine {
		t.Errorf("a refused run changed the Mac:\n%s", after)
	}
	os.Chmod(r.stateDir, 0o755)
	r.mustRun(exitcode.OK, "apply")
	// A run by another user (a dry run) is not refused: it changes nothing.
	os.Chmod(r.stateDir, 0o777)
	if code, _, stderr := r.runAs(501, "apply", "--dry-run"); code != exitcode.OK {
		t.Errorf("dry run as a user: exit %d\n%s", code, stderr)
	}
}

// TestApplyFollowsTheNetwork: the same policies on another network switch
// the shaped link; the state file keeps both links' slots.
func TestApplyFollowsTheNetwork(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "cable": cablePolicy, "travel": travelPolicy}, starlinkFacts)
	r.mustRun(exitcode.OK, "apply")
	r.setFacts(cableFacts)
	stdout, _ := r.mustRun(exitcode.OK, "apply")
	if !strings.Contains(stdout, `+ pipe 48003 "cable/upload"`) || !strings.Contains(stdout, "- pipe 48001") {
		t.Errorf("switch to cable:\n%s", stdout)
	}
	r.setFacts(starlinkFacts)
	stdout, _ = r.mustRun(exitcode.OK, "apply")
	if !strings.Contains(stdout, `+ pipe 48001 "starlink/upload"`) {
		t.Errorf("back to starlink, its pipes must return under the same numbers:\n%s", stdout)
	}
	r.setFacts(`{"interfaces":[{"name":"en0","up":true,"gateway_mac":"00:00:5e:00:53:01"}]}`)
	stdout, _ = r.mustRun(exitcode.OK, "apply")
	if !strings.Contains(stdout, "Plan: 0 to create, 0 to update, 4 to remove.") {
		t.Errorf("unknown network (travel, mode off):\n%s", stdout)
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// TestPlanThroughRun drives the real entry point, run, as main does.
func TestPlanThroughRun(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--config-dir", r.configDir, "--state-dir", r.stateDir, "plan", "--show-commands"},
		strings.NewReader(""), &out, &errb)
	if code != exitcode.OK || !strings.Contains(out.String(), "would run: /sbin/pfctl -E") || !strings.Contains(errb.String(), "… ok") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
}

// TestApplyRefusesAMistypedStateDir: a --state-dir that does not exist is
// not created: with a typo, apply used to start a second record of what
// macake owns, adopt the live pipes and take a second pf reference that a
// down with the right directory never released. The refusal changes
// nothing and names the fix; watch refuses the same way.
func TestApplyRefusesAMistypedStateDir(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	r.mustRun(exitcode.OK, "apply")
	before := r.emu.Snapshot()
	typo := r.stateDir + "-typo"
	var out, errb bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: os.Getenv, euid: func() int { return 0 }}
	for _, cmd := range []string{"apply", "down"} {
		out.Reset()
		errb.Reset()
		code := e.main([]string{"--config-dir", r.configDir, "--state-dir", typo, cmd})
		if code != exitcode.Failure || !strings.Contains(errb.String(), "the state directory "+typo+" does not exist; nothing was changed") ||
			!strings.Contains(errb.String(), "sudo mkdir -m 0755 "+typo) {
			t.Errorf("%s --state-dir TYPO: exit %d\nstderr:\n%s", cmd, code, errb.String())
		}
		if _, err := os.Stat(typo); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s created %s: %v", cmd, typo, err)
		}
		if after := r.emu.Snapshot(); after.String() != before.String() {
			t.Errorf("%s --state-dir TYPO changed the Mac:\nbefore %s\nafter %s", cmd, before, after)
		}
	}
	r.mustRun(exitcode.OK, "down")
	if s := r.emu.Snapshot(); s.RefCount != 0 || s.PFEnabled {
		t.Errorf("down with the right directory left pf enabled: %s", s)
	}
}
