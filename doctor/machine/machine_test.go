// SPDX-License-Identifier: Apache-2.0

//go:build linux || darwin

package machine_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/daemon/operator"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/diag"
	"github.com/macake/macake/doctor"
	"github.com/macake/macake/doctor/machine"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// TestLockProbe finds watch through the real state lock: nobody, a
// one-shot command, and watch itself (which names itself in the lock).
func TestLockProbe(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := machine.LockProbe{}.Watch(ctx, dir)
	if err != nil || s.Running || s.PID != 0 {
		t.Fatalf("no lock file: %+v, %v", s, err)
	}
	l, err := state.AcquireLock(ctx, dir, state.LockOptions{Wait: time.Second, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	s, err = machine.LockProbe{}.Watch(ctx, dir)
	if err != nil || s.Running || s.PID != os.Getpid() {
		t.Fatalf("a one-shot command holds the lock: %+v, %v; want not running, pid %d", s, err, os.Getpid())
	}
	// What `macake watch` writes (state.AcquireLock with "watch").
	if err := os.WriteFile(filepath.Join(dir, state.LockFileName), []byte(strconv.Itoa(os.Getpid())+" watch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = machine.LockProbe{}.Watch(ctx, dir)
	if err != nil || !s.Running || s.PID != os.Getpid() || s.Holder != state.HolderWatch {
		t.Fatalf("watch holds the lock: %+v, %v", s, err)
	}
	l.Release()
	s, err = machine.LockProbe{}.Watch(ctx, dir)
	if err != nil || s.Running {
		t.Fatalf("after release: %+v, %v", s, err)
	}
	// Probing must not keep the lock from the next run.
	l, err = state.AcquireLock(ctx, dir, state.LockOptions{Wait: time.Second, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatalf("the probe left the lock held: %v", err)
	}
	l.Release()
}

// TestProbePingerLoopback sends real echoes to loopback addresses only.
func TestProbePingerLoopback(t *testing.T) {
	if (machine.SocketOpener{}).Open("udp4") != nil && (machine.SocketOpener{}).Open("ip4:icmp") != nil {
		t.Skip("no ICMP socket allowed here (not root, and net.ipv4.ping_group_range excludes this user)")
	}
	targets := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
	echoes, err := machine.ProbePinger{Count: 2, Interval: 20 * time.Millisecond, Timeout: 500 * time.Millisecond}.Ping(context.Background(), "", shape.ICMPReflectors(targets))
	if err != nil {
		t.Fatal(err)
	}
	if len(echoes) != 2 {
		t.Fatalf("%d echoes, want 2", len(echoes))
	}
	for i, e := range echoes {
		if e.Target != targets[i] || e.Sent != 2 || e.Received != 2 || e.RTT <= 0 {
			t.Errorf("echo %d: %+v, want 2/2 replies from %s", i, e, targets[i])
		}
	}
}

// TestDaemonHealthFromARealSocket: doctor's production seams (the state
// lock and statusapi.Fetch on watch.sock) against a real lock held as
// watch and a real status server: the daemon's own answer decides the
// verdict, a failed reconcile is a problem, and once the server stops
// answering (the lock still held) doctor says watch is stuck.
func TestDaemonHealthFromARealSocket(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := state.AcquireLock(ctx, dir, state.LockOptions{Wait: time.Second, Holder: state.HolderWatch, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	ln, err := statusapi.Listen(statusapi.SocketPath(dir), operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	last := statusapi.Apply{At: now.Add(-90 * time.Second), Trigger: "drift", Result: "no_changes"}
	var mu sync.Mutex
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		statusapi.Serve(serveCtx, ln, statusapi.Handler{Status: func(context.Context, statusapi.Query) statusapi.Status {
			mu.Lock()
			defer mu.Unlock()
			la := last
			return statusapi.Status{Daemon: statusapi.Daemon{Running: true, PID: os.Getpid(), StartedAt: now.Add(-time.Hour)}, LastApply: &la}
		}}, nil)
	}()
	sys, release := machine.Local(machine.Options{ConfigDir: filepath.Join(dir, "links.d"), StateDir: dir, Getenv: func(string) string { return "" }})
	defer release()
	sys.Now = func() time.Time { return now }
	health := func() report.Result {
		return healthOf(ctx, t, sys)
	}
	expect(t, health(), report.OK, "macake watch (pid "+strconv.Itoa(os.Getpid())+", up 1h) answers; its last reconcile (drift, 1m30s ago): no changes")

	mu.Lock()
	last = statusapi.Apply{At: now.Add(-5 * time.Second), Trigger: "link_change", Result: "failed", Error: diag.Text("pfctl: DIOCADDRULE: Invalid argument")}
	mu.Unlock()
	logs := "journalctl -u macake-watch"
	if runtime.GOOS == "darwin" {
		logs = "/var/log/macake/watch.stderr.log"
	}
	expect(t, health(), report.Problem, "its last reconcile (link_change, 5s ago) failed: pfctl: DIOCADDRULE", logs)

	stop()
	<-served
	expect(t, health(), report.Problem, "holds the state lock but does not answer on "+statusapi.SocketPath(dir))
}

// healthOf runs doctor's daemon.health check alone on sys.
func healthOf(ctx context.Context, t *testing.T, sys doctor.System) report.Result {
	t.Helper()
	for _, c := range doctor.Checks {
		if c.ID == "daemon.health" {
			return doctor.Run(ctx, doctor.NewInspection(sys), []doctor.Check{c}).Results[0]
		}
	}
	t.Fatal("doctor has no daemon.health check")
	return report.Result{}
}

// expect fails unless r has status and its text says each of says.
func expect(t *testing.T, r report.Result, status report.Status, says ...string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %s, want %s: %s (fix: %s)", r.Status, status, r.Message, r.Fix)
	}
	for _, w := range says {
		if text := r.Message + "\n" + r.Fix; !strings.Contains(text, w) {
			t.Errorf("does not say %q:\n%s", w, text)
		}
	}
}
