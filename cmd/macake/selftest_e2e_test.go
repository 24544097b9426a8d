// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/selftest/scratch"
	"github.com/macake/macake/state"
)

// The selftest as a real process, with the emulator's binaries playing the
// Mac (MACAKE_PFCTL, MACAKE_DNCTL, PFDN_EMU_STATE): the emulator passes
// its own selftest, a spoiled emulator fails it, and an interrupted or
// killed selftest leaves nothing that the next run or `down` does not
// remove.

// skippedOnTheEmulator are the checks that cannot run against the
// emulator binaries on Linux: no packet path to time, no routing socket.
var skippedOnTheEmulator = []string{"lo0.shaping", "route.dump", "ifstat.counters"}

func selftestReport(t *testing.T, stdout string) check.Report {
	t.Helper()
	var r check.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("selftest --json: %v\n%s", err, stdout)
	}
	return r
}

func TestSelftestEmulatorPassesAndFaultsFail(t *testing.T) {
	m := newE2EMac(t)
	pristine := m.emu().Snapshot().String()
	code, stdout, stderr := m.run("selftest", "--json")
	if code != exitcode.OK {
		t.Fatalf("selftest against the emulator: exit %d\n%s\n%s", code, stdout, stderr)
	}
	r := selftestReport(t, stdout)
	if r.Suite != "pf/dummynet" || len(r.Results) < 25 {
		t.Fatalf("report: suite %q, %d checks", r.Suite, len(r.Results))
	}
	for _, res := range r.Results {
		want := check.OK
		if slices.Contains(skippedOnTheEmulator, res.ID) {
			want = check.Skipped
		}
		if res.Status != want || want == check.Skipped && res.Detail == "" {
			t.Errorf("%s: %s (%s), want %s with a reason", res.ID, res.Status, res.Detail, want)
		}
	}
	if after := m.emu().Snapshot().String(); after != pristine {
		t.Fatalf("the selftest left scratch objects:\n%s\nwant:\n%s", after, pristine)
	}
	if _, ok, _ := scratch.Load(m.stateDir); ok {
		t.Error("the scratch record must be gone after a clean run")
	}

	// A Mac that prints another rounding: exit 1, the check named, both
	// bytes shown.
	m.fault(func(e *pfdntest.Emulator) {
		e.AddFault(pfdntest.Fault{Match: `^dnctl pipe show`, Kind: pfdntest.Rewrite, Find: `  1\.001 Mbit/s`, Replace: "  1.000 Mbit/s"})
	})
	code, stdout, _ = m.run("selftest", "--quick")
	if code != exitcode.Failure {
		t.Fatalf("selftest with a rounding fault: exit %d\n%s", code, stdout)
	}
	mustContain(t, "the report", stdout, "differs  dnctl.rounding", `real      "65`, `  1.000 Mbit/s`, `expected  "65`, `  1.001 Mbit/s`, "sudo macake selftest --json")
	m.fault(func(e *pfdntest.Emulator) { e.ClearFaults() })
	if after := m.emu().Snapshot().String(); after != pristine {
		t.Fatalf("a failed check must not leave scratch objects:\n%s", after)
	}
}

// startSelftest starts `macake selftest` in its own process group with a
// hung emulator call at the first flush of the scratch anchor, and waits
// until it hangs there: the anchor, both pipes and the pf references
// exist.
func startSelftest(t *testing.T, m *e2eMac, args ...string) *exec.Cmd {
	t.Helper()
	m.fault(func(e *pfdntest.Emulator) {
		e.ResetCalls()
		e.AddFault(pfdntest.Fault{Match: `^pfctl -a com.apple/macake-selftest -F all$`, Nth: 1, Kind: pfdntest.Hang, HangFor: 3 * time.Second})
	})
	cmd := exec.Command(m.bin, append([]string{"--config-dir", m.configDir, "--state-dir", m.stateDir, "selftest"}, args...)...)
	cmd.Env = m.env
	cmd.Stdout, cmd.Stderr = &strings.Builder{}, &strings.Builder{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	m.eventually("the selftest hanging at the anchor's flush", func() bool {
		return slices.ContainsFunc(m.emu().Calls(), func(c pfdntest.Call) bool { return c.Fault == "hang" })
	})
	snap := m.emu().Snapshot()
	if _, ok := snap.Rulesets["com.apple/macake-selftest"]; !ok || len(snap.References) != 1 {
		t.Fatalf("the scratch anchor and the reference should exist mid-run:\n%s", snap)
	}
	return cmd
}

// TestSelftestInterruptedLeavesNothing: Ctrl-C or SIGTERM mid-selftest
// stops the checks, removes every scratch object and exits 1.
func TestSelftestInterruptedLeavesNothing(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			m := newE2EMac(t)
			pristine := m.emu().Snapshot().String()
			cmd := startSelftest(t, m, "--quick")
			syscall.Kill(cmd.Process.Pid, sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the selftest did not stop within 20 s")
			}
			stdout := cmd.Stdout.(*strings.Builder).String()
			if code := cmd.ProcessState.ExitCode(); code != exitcode.Failure || !strings.Contains(stdout, "Interrupted") || !strings.Contains(stdout, "Cleanup: flushed anchor com.apple/macake-selftest") {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, cmd.Stderr)
			}
			m.fault(func(e *pfdntest.Emulator) { e.ClearFaults() })
			if after := m.emu().Snapshot().String(); after != pristine {
				t.Fatalf("scratch objects left after %v:\n%s\nwant:\n%s", sig, after, pristine)
			}
			if _, ok, _ := scratch.Load(m.stateDir); ok {
				t.Error("the scratch record must be gone")
			}
		})
	}
}

// TestSelftestKilledIsCleanedByTheNextRunOrDown: a kill -9 leaves the
// scratch objects and their record; the next selftest removes them
// first, and so does `down`.
func TestSelftestKilledIsCleanedByTheNextRunOrDown(t *testing.T) {
	m := newE2EMac(t)
	pristine := m.emu().Snapshot().String()
	for _, next := range []string{"selftest", "down"} {
		cmd := startSelftest(t, m, "--quick")
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		m.fault(func(e *pfdntest.Emulator) { e.ClearFaults() })
		rec, ok, err := scratch.Load(m.stateDir)
		if err != nil || !ok || rec.Anchor == "" || len(rec.Pipes) != 2 || len(rec.Tokens) == 0 {
			t.Fatalf("after kill -9 the record must name the objects: %+v %v %v", rec, ok, err)
		}
		if m.emu().Snapshot().String() == pristine {
			t.Fatal("the killed selftest should have left its objects")
		}
		if next == "down" {
			if code, _, stderr := m.run("down", "--dry-run"); code != exitcode.OK || !strings.Contains(stderr, "those still there would be removed: anchor com.apple/macake-selftest, pipe 65") {
				t.Fatalf("down --dry-run must name the leftovers: exit %d\n%s", code, stderr)
			}
		}
		args := []string{next}
		if next == "selftest" {
			args = append(args, "--quick")
		}
		code, stdout, stderr := m.run(args...)
		if code != exitcode.OK {
			t.Fatalf("%s after kill -9: exit %d\n%s\n%s", next, code, stdout, stderr)
		}
		if !strings.Contains(stdout+stderr, "removed what an earlier selftest (pid") {
			t.Errorf("%s does not say it removed the leftovers:\n%s\n%s", next, stdout, stderr)
		}
		if after := m.emu().Snapshot().String(); after != pristine {
			t.Fatalf("after %s:\n%s\nwant:\n%s", next, after, pristine)
		}
	}
}

// TestSelftestRefusesWhileWatchRuns unless --force.
func TestSelftestRefusesWhileWatchRuns(t *testing.T) {
	m := newE2EMac(t)
	l, err := state.AcquireLock(context.Background(), m.stateDir, state.LockOptions{Wait: time.Second, Holder: state.HolderWatch, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	code, stdout, stderr := m.run("selftest", "--quick")
	if code != exitcode.Failure || !strings.Contains(stderr, "macake watch (pid") || !strings.Contains(stderr, "--force") {
		t.Fatalf("selftest while watch runs: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if len(m.emu().Calls()) != 0 {
		t.Error("a refused selftest must not call pfctl or dnctl")
	}
	if code, stdout, stderr := m.run("selftest", "--quick", "--force"); code != exitcode.OK {
		t.Fatalf("selftest --force: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
