// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/daemon/operator"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/diag"
	"github.com/macake/macake/state"
)

// TestStatusWithoutDaemon: with no daemon, status says so and shows the
// static picture: the matching policy, the live pipes, the known networks.
func TestStatusWithoutDaemon(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "travel": travelPolicy}, starlinkFacts)
	setHostGOOS(t, "darwin")
	r.mustRun(exitcode.OK, "apply")
	stdout, _ := r.mustRun(exitcode.OK, "status")
	mustContain(t, "status", stdout,
		"macake watch: not running (nothing answers on "+filepath.Join(r.stateDir, "watch.sock")+")",
		"start the daemon with 'sudo macake install-daemon'",
		"starlink  en0        autorate  static  150 Mbit/s",
		"pipe 48002  download",
		"* starlink",
	)
	stdout, _ = r.mustRun(exitcode.OK, "status", "--json")
	var st statusapi.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Daemon.Running || st.FormatVersion != statusapi.FormatVersion || len(st.Links) != 1 || len(st.Links[0].Shapers) != 2 || st.Links[0].Shapers[0].Source != "live" {
		t.Fatalf("status --json: %+v", st)
	}

	// Without root the live pipes cannot be read; status says so, shows
	// what a start would install, and does not call the link unshaped.
	code, stdout, _ := r.runAs(501, "status")
	if code != exitcode.OK || !strings.Contains(stdout, "Live state: not read:") || !strings.Contains(stdout, "policy (not read live)") ||
		!strings.Contains(stdout, "starlink  en0        autorate  unknown") || strings.Contains(stdout, "not shaped") {
		t.Errorf("status without root: exit %d\n%s", code, stdout)
	}

	// On Linux install-daemon only prints a systemd unit.
	setHostGOOS(t, "linux")
	stdout, _ = r.mustRun(exitcode.OK, "status")
	if !strings.Contains(stdout, "run the daemon under systemd: see 'macake install-daemon --systemd-unit'") || strings.Contains(stdout, "sudo macake install-daemon") {
		t.Errorf("status on Linux without a daemon:\n%s", stdout)
	}
}

// TestStatusWithoutDaemonKeepsTheLastGoodPolicy: a file broken while
// watch is not running still counts with the copy watch saved when it
// last accepted it (that is what watch keeps in force at its next start),
// not as gone, which would show another policy as the one in force.
func TestStatusWithoutDaemonKeepsTheLastGoodPolicy(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "travel": travelPolicy}, starlinkFacts)
	setHostGOOS(t, "darwin")
	r.mustRun(exitcode.OK, "apply")
	saved := state.LastGoodDir(r.stateDir)
	if err := os.MkdirAll(saved, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(saved, "starlink.toml"), []byte(starlinkPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(starlinkPolicy, `"150mbit"`, `"150mbps"`, 1)
	if broken == starlinkPolicy {
		t.Fatal("the starlink policy no longer has a 150mbit rate to break")
	}
	if err := os.WriteFile(filepath.Join(r.configDir, "starlink.toml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _ := r.mustRun(exitcode.OK, "status", "--json")
	var st statusapi.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Links) != 1 || st.Links[0].Name != "starlink" {
		t.Fatalf("links in force: %+v; want starlink's last good policy", st.Links)
	}
	if len(st.ConfigErrors) == 0 || st.ConfigErrors[0].Kept != "last_good" {
		t.Fatalf("config errors: %+v", st.ConfigErrors)
	}
}

// TestApplyPrunesCopiesOfDeletedPolicies: apply runs while watch does
// not; a policy file deleted meanwhile loses its saved copy then, so a new
// broken file of that name cannot bring the old policy back at watch's
// next start. Copies of files that still exist stay.
func TestApplyPrunesCopiesOfDeletedPolicies(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	saved := state.LastGoodDir(r.stateDir)
	if err := os.MkdirAll(saved, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"starlink", "cable"} {
		if err := os.WriteFile(filepath.Join(saved, name+".toml"), []byte(starlinkPolicy), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.mustRun(exitcode.OK, "apply", "--dry-run")
	if _, err := os.Stat(filepath.Join(saved, "cable.toml")); err != nil {
		t.Fatal("a dry run pruned a copy; it changes nothing")
	}
	r.mustRun(exitcode.OK, "apply")
	if _, err := os.Stat(filepath.Join(saved, "cable.toml")); err == nil {
		t.Error("the copy of a deleted policy survived apply")
	}
	if _, err := os.Stat(filepath.Join(saved, "starlink.toml")); err != nil {
		t.Error("the copy of a policy that exists was removed")
	}
}

// TestPlanBesideWatchUsesItsReflectors: while watch runs, the anchor
// exempts its controllers' current reflectors; a dry run and doctor plan
// with those (asked over watch.sock), not with the policy's list, or they
// would show watch's own exemptions as drift.
func TestPlanBesideWatchUsesItsReflectors(t *testing.T) {
	rotated := strings.Replace(starlinkPolicy, `["1.1.1.1", "9.9.9.9"]`, `["8.8.8.8"]`, 1)
	r := newRig(t, map[string]string{"starlink": rotated}, starlinkFacts)
	r.mustRun(exitcode.OK, "apply") // the live exemptions: watch's 8.8.8.8
	if err := os.WriteFile(filepath.Join(r.configDir, "starlink.toml"), []byte(starlinkPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	st := sampleStatus(r.stateDir)
	st.Links[0].Controller.Reflectors = []statusapi.Reflector{{Address: "8.8.8.8"}}
	serveStatus(t, r.stateDir, st)
	stdout, _ := r.mustRun(exitcode.OK, "plan")
	if !strings.Contains(stdout, "No changes.") {
		t.Errorf("plan beside watch shows watch's exemptions as drift:\n%s", stdout)
	}
}

func setHostGOOS(t *testing.T, goos string) {
	old := hostGOOS
	hostGOOS = goos
	t.Cleanup(func() { hostGOOS = old })
}

// TestStatusSocketDenied: a user who may not open the socket of a running
// watch is told that it runs, by whom, and to use sudo for its view; a
// socket nobody holds the lock behind is a leftover, not a daemon.
func TestStatusSocketDenied(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	r.mustRun(exitcode.OK, "apply")
	socket := statusapi.SocketPath(r.stateDir)
	old := fetchStatus
	fetchStatus = func(context.Context, string, statusapi.Query) (statusapi.Status, error) {
		return statusapi.Status{}, fmt.Errorf("%w: %s answers root only; run with sudo", statusapi.ErrPermission, socket)
	}
	defer func() { fetchStatus = old }()
	l, err := state.AcquireLock(context.Background(), r.stateDir, state.LockOptions{Wait: time.Second, Holder: state.HolderWatch, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := r.runAs(501, "status")
	want := fmt.Sprintf("macake watch: running, pid %d (its socket answers %s only; run with sudo for its view).", os.Getpid(), statusapi.Readers(socket))
	if code != exitcode.OK || !strings.Contains(stdout, want) || strings.Contains(stdout, "not running") || strings.Contains(stdout, "install-daemon") ||
		!strings.Contains(stdout, "autorate  unknown") || strings.Contains(stdout, "not shaped") {
		t.Errorf("status as a user with watch running: exit %d, want %q:\n%s", code, want, stdout)
	}
	_, stdout, _ = r.runAs(501, "status", "--json")
	var st statusapi.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || !st.Daemon.Running || !st.Daemon.PermissionDenied || st.Daemon.PID != os.Getpid() {
		t.Errorf("status --json as a user with watch running: %v %+v", err, st.Daemon)
	}
	l.Release()
	_, stdout, _ = r.runAs(501, "status", "--json")
	st = statusapi.Status{}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || st.Daemon.Running || !st.Daemon.PermissionDenied || !strings.Contains(st.Daemon.Note, "left over") {
		t.Errorf("status --json with a stale socket: %v %+v", err, st.Daemon)
	}
}

// TestStatusWatchWithoutSocket: a watch that holds the state lock but
// does not answer on its socket (issue 12: a socket path too long to
// bind) is reported as running, with why it cannot be asked, never as
// "not running".
func TestStatusWatchWithoutSocket(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	r.mustRun(exitcode.OK, "apply")
	l, err := state.AcquireLock(context.Background(), r.stateDir, state.LockOptions{Wait: time.Second, Holder: state.HolderWatch, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	code, stdout, _ := r.runAs(0, "status")
	want := fmt.Sprintf("macake watch: running, pid %d (watch (pid %d) holds the state lock but does not answer on %s", os.Getpid(), os.Getpid(), statusapi.SocketPath(r.stateDir))
	if code != exitcode.OK || !strings.Contains(stdout, want) || strings.Contains(stdout, "not running") || strings.Contains(stdout, "install-daemon") {
		t.Errorf("status with a watch that has no socket: exit %d, want %q:\n%s", code, want, stdout)
	}
}

// TestStatusBeforeTheFirstReply: a controller that has no reply yet shows
// no baseline, delay or reply age: its starting values were never measured.
func TestStatusBeforeTheFirstReply(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	st := sampleStatus(r.stateDir)
	c := st.Links[0].Controller
	c.Status, c.Responses, c.SinceResponseSeconds, c.IdleRTTSeconds = "stalled", 0, 9, 0.1
	c.Download.BaselineSeconds, c.Upload.BaselineSeconds = 0.1, 0.1
	c.Reflectors = []statusapi.Reflector{{Address: "1.1.1.1", BaselineDownSeconds: 0.1, BaselineUpSeconds: 0.1, SinceResponseSeconds: 2}}
	serveStatus(t, r.stateDir, st)
	stdout, _ := r.mustRun(exitcode.OK, "status")
	mustContain(t, "status", stdout,
		"controller: stalled; 0 replies, 31 cuts, 402 increases; no reply yet",
		"reflector 1.1.1.1         baseline -, 0 replies, no reply yet",
		"baseline -, delay -",
	)
	for _, never := range []string{"100.0ms", "9.00s", "2.00s"} {
		if strings.Contains(stdout, never) {
			t.Errorf("status shows the unmeasured %q:\n%s", never, stdout)
		}
	}
}

// sampleStatus is what a daemon answers mid-run.
func sampleStatus(stateDir string) statusapi.Status {
	now := time.Now()
	return statusapi.Status{
		FormatVersion: statusapi.FormatVersion,
		Daemon: statusapi.Daemon{Running: true, Socket: statusapi.SocketPath(stateDir), PID: 812, Version: "v0.3.0",
			StartedAt: now.Add(-2 * time.Hour), UptimeSeconds: 7260},
		Backend: statusapi.Backend{Name: "pf", System: "pf/dummynet", Scope: `pf anchor "com.apple/macake", dummynet pipes 48001-48998`},
		Links: []statusapi.Link{{
			Name: "starlink", Interface: "en0", Mode: "autorate", ProfileKey: "starlink@74:24:9f:00:00:01", Shaped: true,
			Shapers: []statusapi.Shaper{
				{Direction: "upload", Name: "pipe 48001", RateBits: 14_100_000, QueueBytes: 36864, Source: "controller"},
				{Direction: "download", Name: "pipe 48002", RateBits: 142_300_000, QueueBytes: 355328, Source: "controller"},
			},
			Controller: &statusapi.Controller{Mode: "autorate", Status: "running", Shaping: true, Engaged: true,
				IdleRTTSeconds: 0.0242, Responses: 8120, Cuts: 31, Increases: 402,
				Download: statusapi.Direction{RateBits: 142_300_000, MinBits: 20_000_000, BaseBits: 150_000_000, MaxBits: 350_000_000,
					AchievedBits: 98_100_000, LoadPercent: 68, Load: "low", BaselineSeconds: 0.0121, DelayDeltaSeconds: 0.0032, Delayed: 1},
				Upload: statusapi.Direction{RateBits: 14_100_000, MinBits: 3_000_000, BaseBits: 15_000_000, MaxBits: 40_000_000,
					AchievedBits: 1_200_000, LoadPercent: 8, Load: "idle", BaselineSeconds: 0.0121, DelayDeltaSeconds: 0.0004},
				Reflectors: []statusapi.Reflector{{Address: "1.1.1.1", BaselineDownSeconds: 0.0121, BaselineUpSeconds: 0.0121, Responses: 1353}},
			},
		}},
		LastApply:    &statusapi.Apply{At: now.Add(-12 * time.Second), Trigger: "drift", Result: "no_changes", LastChange: now.Add(-time.Hour)},
		ConfigErrors: []statusapi.ConfigError{{Diagnostic: diag.Diagnostic{File: "/etc/macake/links.d/hotel.toml", Line: 7, Column: 12, Message: `shaper.download: rate "40mbps": did you mean "40mbit"?`, Link: "hotel"}, Kept: "last_good"}},
		Problems:     []diag.Diagnostic{},
		Policies:     []statusapi.Policy{{Name: "starlink", Interface: "en0", Mode: "autorate", Active: true, Reason: "active"}},
		DriftRepairs: map[string]int{"shaper_missing": 1},
	}
}

// serveStatus answers status requests on the rig's socket as a daemon
// would, until the test ends.
func serveStatus(t *testing.T, stateDir string, st statusapi.Status) {
	t.Helper()
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := statusapi.Listen(statusapi.SocketPath(stateDir), operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	go statusapi.Serve(t.Context(), ln, statusapi.Handler{Status: func(context.Context, statusapi.Query) statusapi.Status { return st }}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestStatusFromDaemon: with a daemon answering, status shows its view:
// one row per link, then pipes, controller, reflectors, errors in force.
func TestStatusFromDaemon(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	serveStatus(t, r.stateDir, sampleStatus(r.stateDir))
	stdout, _ := r.mustRun(exitcode.OK, "status")
	for _, want := range []string{
		"macake watch: running, pid 812, up 2h01m, version v0.3.0",
		"Last reconcile: 12s ago (drift): no changes; last change 1h00m ago",
		"LINK      INTERFACE  MODE      STATE    DOWNLOAD    UPLOAD       BASELINE  DELAY ↓/↑    LOAD ↓/↑  BLOAT ↓/↑",
		"starlink  en0        autorate  running  142 Mbit/s  14.1 Mbit/s  24.2ms    +3.2/+0.4ms  68%/8%    1/0",
		"pipe 48002 download 142 Mbit/s queue 347 KB controller; range 20.0 Mbit/s–350 Mbit/s, base 150 Mbit/s",
		"reflector 1.1.1.1 baseline ↓12.1ms ↑12.1ms, 1353 replies",
		"/etc/macake/links.d/hotel.toml:7:12: shaper.download",
		"its last good policy stays in force",
		"Drift repaired since start: shaper_missing 1",
	} {
		if !strings.Contains(stdout, want) && !strings.Contains(strings.Join(strings.Fields(stdout), " "), want) {
			t.Errorf("status lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _ = r.mustRun(exitcode.OK, "status", "--json")
	var st statusapi.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || !st.Daemon.Running || st.Links[0].Controller.Cuts != 31 {
		t.Fatalf("status --json: %v %+v", err, st)
	}
}

// TestStatusFollow redraws the table until interrupted.
func TestStatusFollow(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	serveStatus(t, r.stateDir, sampleStatus(r.stateDir))
	old := statusRefresh
	statusRefresh = 10 * time.Millisecond
	defer func() { statusRefresh = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	e := &env{ctx: ctx, stdout: &out, stderr: &errb, getenv: os.Getenv, euid: func() int { return 0 }}
	if code := e.main([]string{"--config-dir", r.configDir, "--state-dir", r.stateDir, "status", "--follow", "--json"}); code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("%d documents in 200 ms at 10 ms, want several:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		var st statusapi.Status
		if err := json.Unmarshal([]byte(l), &st); err != nil || !st.Daemon.Running {
			t.Fatalf("line %q: %v", l, err)
		}
	}
}

func TestWatchRefusals(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	if code, _, stderr := r.runAs(501, "watch"); code != exitcode.NoPerm || !strings.Contains(stderr, "Run with sudo") {
		t.Errorf("watch as a user: exit %d, %s", code, stderr)
	}
	if code, _, stderr := r.run("watch", "--drift-interval", "1ms"); code != exitcode.Usage || !strings.Contains(stderr, "too short") {
		t.Errorf("watch with a 1 ms drift interval: exit %d, %s", code, stderr)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(r.configDir), "macake.toml"), []byte("log_format = \"xml\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := r.run("watch"); code != exitcode.Config || !strings.Contains(stderr, "log_format") {
		t.Errorf("watch with invalid settings: exit %d, %s", code, stderr)
	}
}

// TestSecondWatchSaysSo: a watch that finds another one holding the lock
// says that a watch runs, not the advice meant for apply and down.
func TestSecondWatchSaysSo(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	t.Setenv("GOMAXPROCS", strconv.Itoa(runtime.GOMAXPROCS(0))) // keep watch from changing the test's
	old := watchLockWait
	watchLockWait = 100 * time.Millisecond
	defer func() { watchLockWait = old }()
	l, err := state.AcquireLock(context.Background(), r.stateDir, state.LockOptions{Wait: time.Second, Holder: state.HolderWatch, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	code, _, stderr := r.run("watch")
	want := fmt.Sprintf("another macake watch (pid %d) is running", os.Getpid())
	if code != exitcode.Failure || !strings.Contains(stderr, want) || !strings.Contains(stderr, "only one watch runs at a time") {
		t.Errorf("second watch: exit %d, stderr lacks %q:\n%s", code, want, stderr)
	}
	if strings.Contains(stderr, "To apply or take shaping down by hand") {
		t.Errorf("second watch got apply's advice:\n%s", stderr)
	}
	// It says at once that it waits, and for whom, rather than sit silent.
	if !strings.Contains(stderr, "the state lock is held; waiting for it") || !strings.Contains(stderr, fmt.Sprintf("pid=%d", os.Getpid())) {
		t.Errorf("second watch did not say it waits for the lock:\n%s", stderr)
	}
}
