// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/testuser"
)

// testLock is the options a test takes the state lock with: wait that
// long, as holder, creating the directory's lock file; the ownership
// checks apply only to root.
func testLock(wait time.Duration, holder string) LockOptions {
	return LockOptions{Wait: wait, Holder: holder, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0}
}

// mustLock takes the state lock in dir as holder, waiting up to a
// second, and fails the test when it cannot.
func mustLock(t *testing.T, dir, holder string) *Lock {
	t.Helper()
	l, err := AcquireLock(context.Background(), dir, testLock(time.Second, holder))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLockExcludesAndNamesTheHolder(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	held := mustLock(t, dir, "")
	_, err := AcquireLock(ctx, dir, testLock(100*time.Millisecond, ""))
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
	again, err := AcquireLock(ctx, dir, testLock(100*time.Millisecond, ""))
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
}

func TestLockWaitsForTheHolder(t *testing.T) {
	dir := t.TempDir()
	held := mustLock(t, dir, "")
	released := make(chan struct{})
	go func() {
		time.Sleep(150 * time.Millisecond)
		held.Release()
		close(released)
	}()
	l, err := AcquireLock(context.Background(), dir, testLock(10*time.Second, ""))
	if err != nil {
		t.Fatalf("the waiter must get the lock once it is released: %v", err)
	}
	<-released
	l.Release()
}

func TestLockHonoursContext(t *testing.T) {
	dir := t.TempDir()
	held := mustLock(t, dir, "")
	defer held.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := AcquireLock(ctx, dir, testLock(10*time.Second, "")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestLockHeldByWatchSaysTheDaemonIsRunning(t *testing.T) {
	dir := t.TempDir()
	held := mustLock(t, dir, HolderWatch)
	defer held.Release()
	_, err := AcquireLock(context.Background(), dir, testLock(50*time.Millisecond, ""))
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
	l := mustLock(t, dir, HolderWatch)
	pid, who, held, err := Holder(dir)
	if !held || pid != os.Getpid() || who != HolderWatch || err != nil {
		t.Fatalf("held by watch: pid %d, holder %q, held %v, %v", pid, who, held, err)
	}
	if _, err := AcquireLock(context.Background(), dir, testLock(50*time.Millisecond, "")); !errors.Is(err, ErrLocked) {
		t.Fatalf("the probe must leave the lock held: %v", err)
	}
	l.Release()
	if _, _, held, err := Holder(dir); held || err != nil {
		t.Fatalf("after release: held %v, %v", held, err)
	}
	again, err := AcquireLock(context.Background(), dir, testLock(50*time.Millisecond, ""))
	if err != nil {
		t.Fatalf("the probe must not keep the lock: %v", err)
	}
	again.Release()
}

// asNobody runs argv as uid and gid 65534 with setpriv, returning the
// exit code; ctx ends it.
func asNobody(ctx context.Context, t *testing.T, argv ...string) (int, string) {
	t.Helper()
	cmd := execrun.Command{Argv: append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}, argv...)}
	res, err := execrun.Exec{Timeout: time.Minute}.Run(ctx, cmd)
	if err != nil && ctx.Err() == nil {
		t.Errorf("%v: %v", cmd, err)
	}
	return res.ExitCode, string(res.Stderr)
}

func needSetpriv(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a process as another user")
	}
	for _, tool := range []string{"setpriv", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (util-linux): %v", tool, err)
		}
	}
}

// TestLockIsRootsAlone: the lock file is 0600, and one an older macake
// left 0644 becomes so, so that no other user can open it, let alone
// hold a shared lock on it that blocks every apply, down and watch.
func TestLockIsRootsAlone(t *testing.T) {
	needSetpriv(t)
	dir := testuser.SharedDir(t)
	path := filepath.Join(dir, LockFileName)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, dir, "")
	if code, stderr := asNobody(context.Background(), t, "cat", filepath.Join(dir, HolderFileName)); code != 0 {
		t.Fatalf("others must be able to read the holder file (and this test needs them to enter the directory): %s", stderr)
	}
	l.Release()
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("lock file mode %v, %v; want 0600", info.Mode(), err)
	}
	if code, stderr := asNobody(context.Background(), t, "flock", "-n", "-s", path, "true"); code == 0 || !strings.Contains(stderr, "Permission denied") {
		t.Fatalf("another user could lock it: exit %d, %s", code, stderr)
	}
}

// TestLockHeldByAnotherUserIsNamed: a lock another user took (on a file an
// older macake left 0644) is reported as that process's, with its uid,
// not blamed on the last macake pid written in the file.
func TestLockHeldByAnotherUserIsNamed(t *testing.T) {
	needSetpriv(t)
	dir := testuser.SharedDir(t)
	path := filepath.Join(dir, LockFileName)
	if err := os.WriteFile(path, []byte("999999 watch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { asNobody(ctx, t, "flock", "-s", path, "sleep", "60"); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if h, _ := flockHolders(f); len(h) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other user's flock never showed up in /proc/locks")
		}
	}
	_, err = AcquireLock(context.Background(), dir, testLock(100*time.Millisecond, ""))
	var le *LockedError
	if !errors.As(err, &le) || le.Blocker == nil || le.Blocker.UID != 65534 ||
		!strings.Contains(err.Error(), "uid 65534 (not root), which is not a macake run") || strings.Contains(err.Error(), "999999") {
		t.Fatalf("got %v", err)
	}
}

// TestHolderFileTellsUsersWhoHoldsTheLock: a user, who may not open the
// lock, learns from the holder file that watch runs, and that it no
// longer does once that process is gone.
func TestHolderFileTellsUsersWhoHoldsTheLock(t *testing.T) {
	dir := t.TempDir()
	l := mustLock(t, dir, HolderWatch)
	if pid, who, held := holderFromFile(dir, LockFileName); !held || pid != os.Getpid() || who != HolderWatch {
		t.Fatalf("while held: %d %q %v", pid, who, held)
	}
	l.Release()
	if _, _, held := holderFromFile(dir, LockFileName); held {
		t.Fatal("released, but the holder file still says held")
	}
	// A crash leaves the file; a pid that no longer runs is no holder.
	os.WriteFile(filepath.Join(dir, HolderFileName), []byte("999999999 watch\n"), 0o644)
	if _, _, held := holderFromFile(dir, LockFileName); held {
		t.Fatal("a dead pid reads as holding the lock")
	}
}

// TestNamedLocksAreSeparate: the selftest's lock neither waits for nor
// blocks the state lock, and HolderOf reads each on its own.
func TestNamedLocksAreSeparate(t *testing.T) {
	dir := t.TempDir()
	st, err := AcquireLock(context.Background(), dir, LockOptions{Wait: time.Second, Name: SelftestLockName, Holder: "selftest", SkipOwnershipCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release()
	main, err := AcquireLock(context.Background(), dir, testLock(50*time.Millisecond, ""))
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
	if _, err := AcquireLock(context.Background(), dir, LockOptions{Wait: 50 * time.Millisecond, Name: SelftestLockName, SkipOwnershipCheck: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second selftest must not get the lock: %v", err)
	}
}

// TestMissingStateDirSpeaksOfBothSystems: the refusal a Linux user reads
// names pf only as macOS's (issue 27, item 12).
func TestMissingStateDirSpeaksOfBothSystems(t *testing.T) {
	msg := (&MissingStateDirError{Dir: "/srv/state"}).Error()
	if !strings.Contains(msg, "a second record of what it owns (on macOS, with a second pf reference)") || !strings.Contains(msg, "sudo mkdir -m 0755 /srv/state") {
		t.Errorf("%q", msg)
	}
}
