// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestLockExcludesAndNamesTheHolder(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	held, err := AcquireLock(ctx, dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(ctx, dir, 100*time.Millisecond)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want a LockedError", err)
	}
	if le.PID != os.Getpid() || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("the error must name the holder's pid %d: %v", os.Getpid(), err)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := AcquireLock(ctx, dir, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
}

func TestLockWaitsForTheHolder(t *testing.T) {
	dir := t.TempDir()
	held, err := AcquireLock(context.Background(), dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(150 * time.Millisecond)
		held.Release()
		close(released)
	}()
	l, err := AcquireLock(context.Background(), dir, 10*time.Second)
	if err != nil {
		t.Fatalf("the waiter must get the lock once it is released: %v", err)
	}
	<-released
	l.Release()
}

func TestLockHonoursContext(t *testing.T) {
	dir := t.TempDir()
	held, err := AcquireLock(context.Background(), dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := AcquireLock(ctx, dir, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestLockHeldByWatchSaysTheDaemonIsRunning(t *testing.T) {
	dir := t.TempDir()
	held, err := AcquireLockAs(context.Background(), dir, time.Second, HolderWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	_, err = AcquireLock(context.Background(), dir, 50*time.Millisecond)
	var le *LockedError
	if !errors.As(err, &le) || le.Holder != HolderWatch || le.PID != os.Getpid() {
		t.Fatalf("got %#v (%v), want a LockedError naming watch and pid %d", le, err, os.Getpid())
	}
	for _, want := range []string{"macake watch (pid", "is running", "stop it first"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error must say %q:\n%v", want, err)
		}
	}
}

// TestLockedErrorAdviceFitsTheSystem: the way to stop the daemon is
// launchd's on macOS and systemd's on Linux, where uninstall-daemon does
// not exist.
func TestLockedErrorAdviceFitsTheSystem(t *testing.T) {
	for _, tt := range []struct {
		goos      string
		want, not []string
	}{
		{"darwin", []string{"(pid 42)", "keeps pf/dummynet matching", "sudo launchctl bootout system/org.macake.watch", "uninstall-daemon"}, []string{"systemctl"}},
		{"linux", []string{"(pid 42)", "keeps the shaping matching", "sudo systemctl stop macake-watch", "install-daemon --systemd-unit"}, []string{"launchctl", "uninstall-daemon", "pf/dummynet"}},
	} {
		msg := (&LockedError{PID: 42, Holder: HolderWatch, GOOS: tt.goos}).Error()
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", tt.goos, msg, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(msg, n) {
				t.Errorf("%s: %q must not say %q", tt.goos, msg, n)
			}
		}
	}
}

// TestHolderProbesWithoutTaking: a reader learns that watch holds the
// lock, and who it is, without disturbing it.
func TestHolderProbesWithoutTaking(t *testing.T) {
	dir := t.TempDir()
	if _, _, held, err := Holder(dir); held || err != nil {
		t.Fatalf("no lock file: held %v, %v", held, err)
	}
	l, err := AcquireLockAs(context.Background(), dir, time.Second, HolderWatch)
	if err != nil {
		t.Fatal(err)
	}
	pid, who, held, err := Holder(dir)
	if !held || pid != os.Getpid() || who != HolderWatch || err != nil {
		t.Fatalf("held by watch: pid %d, holder %q, held %v, %v", pid, who, held, err)
	}
	if _, err := AcquireLock(context.Background(), dir, 50*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("the probe must leave the lock held: %v", err)
	}
	l.Release()
	if _, _, held, err := Holder(dir); held || err != nil {
		t.Fatalf("after release: held %v, %v", held, err)
	}
	again, err := AcquireLock(context.Background(), dir, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("the probe must not keep the lock: %v", err)
	}
	again.Release()
}

// TestNamedLocksAreSeparate: the selftest's lock neither waits for nor
// blocks the state lock, and HolderOf reads each on its own.
func TestNamedLocksAreSeparate(t *testing.T) {
	dir := t.TempDir()
	st, err := AcquireLockWith(context.Background(), dir, LockOptions{Wait: time.Second, Name: SelftestLockName, Holder: "selftest", SkipOwnershipCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release()
	main, err := AcquireLock(context.Background(), dir, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("the state lock must be free while the selftest holds its own: %v", err)
	}
	main.Release()
	if pid, who, held, err := HolderOf(dir, SelftestLockName); !held || pid != os.Getpid() || who != "selftest" || err != nil {
		t.Fatalf("selftest lock: pid %d, holder %q, held %v, %v", pid, who, held, err)
	}
	if _, _, held, _ := Holder(dir); held {
		t.Fatal("the state lock is not held")
	}
	if _, err := AcquireLockWith(context.Background(), dir, LockOptions{Wait: 50 * time.Millisecond, Name: SelftestLockName, SkipOwnershipCheck: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second selftest must not get the lock: %v", err)
	}
}
