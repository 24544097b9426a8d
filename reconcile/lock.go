// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/state"
)

// LockFileName is the lock file inside the state directory.
const LockFileName = "macake.lock"

// DefaultLockWait is how long a mutating run waits for another to finish
// before giving up: long enough for any apply, short enough that a person
// is not left staring at a silent terminal.
const DefaultLockWait = 3 * time.Second

// lockPoll is how often a waiting run retries the lock.
const lockPoll = 50 * time.Millisecond

// ErrLocked is matched (errors.Is) by a *LockedError.
var ErrLocked = errors.New("another macake run holds the lock")

// HolderWatch names the daemon as the lock's holder (AcquireLockAs): it
// holds the lock for as long as it runs, so a waiting command says so
// instead of asking people to wait.
const HolderWatch = "watch"

// LockedError says that another process holds the state lock.
type LockedError struct {
	// Path is the lock file.
	Path string
	// PID is the holder's process id as it wrote it; 0 when unknown.
	PID int
	// Holder is what the holder said it is (HolderWatch for the daemon);
	// "" for a one-shot command.
	Holder string
	// Waited is how long this run waited.
	Waited time.Duration
	// GOOS picks the advice: launchd's on macOS, systemd's elsewhere;
	// "" is runtime.GOOS.
	GOOS string
}

// Error names the holder and what to do.
func (e *LockedError) Error() string {
	pid := ""
	if e.PID > 0 {
		pid = fmt.Sprintf(" (pid %d)", e.PID)
	}
	system, stop := "pf/dummynet", "sudo launchctl bootout system/org.macake.watch (or sudo macake uninstall-daemon, which also runs down)"
	if e.goos() != "darwin" {
		// uninstall-daemon is launchd's: on Linux the daemon runs under
		// the systemd unit 'install-daemon --systemd-unit' prints.
		system, stop = "the shaping", "sudo systemctl stop macake-watch (the unit 'macake install-daemon --systemd-unit' prints; a watch started by hand stops with Ctrl-C or kill)"
	}
	if e.Holder == HolderWatch {
		return fmt.Sprintf("macake watch%s is running and keeps %s matching the policy files by itself: "+
			"a saved change is applied within a second (see 'macake status'). To apply or take shaping down by hand, "+
			"stop it first: %s", pid, system, stop)
	}
	return fmt.Sprintf("another macake process%s is changing %s and still holds %s after %s; wait for it to finish (or stop it) and try again",
		pid, system, e.Path, e.Waited.Round(100*time.Millisecond))
}

func (e *LockedError) goos() string {
	if e.GOOS == "" {
		return runtime.GOOS
	}
	return e.GOOS
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Lock is a held state lock: an exclusive flock on LockFileName in the
// state directory, with the holder's pid written into the file so that a
// waiting run can name it. The kernel releases it when the process dies,
// so a crash never leaves a stale lock.
type Lock struct {
	f *os.File
}

// LockOptions tune AcquireLockWith.
type LockOptions struct {
	// Wait is how long to wait for another holder to let go.
	Wait time.Duration
	// Holder is recorded beside the pid (one word, e.g. HolderWatch), so
	// that a run that cannot get the lock can tell people what holds it.
	Holder string
	// SkipOwnershipCheck turns off state.CheckOwnership of the state
	// directory and file (root-owned, not writable by group or others),
	// for tests and for runs by a user other than root, as
	// config.LoadOptions.SkipOwnershipCheck does for the config directory.
	SkipOwnershipCheck bool
	// Name is the lock file inside the state directory; "" is
	// LockFileName. Another name is another lock: `macake selftest` keeps
	// its own (SelftestLockName), so it never waits for, nor blocks, apply.
	Name string
}

// SelftestLockName is the lock a running `macake selftest` holds, so that
// `down` leaves its scratch objects to it and two selftests never share
// them.
const SelftestLockName = "selftest.lock"

func (o LockOptions) name() string {
	if o.Name == "" {
		return LockFileName
	}
	return o.Name
}

// AcquireLock takes the state lock in dir (created if needed), waiting up
// to wait for another holder to let go. It fails with a *LockedError when
// the wait runs out, or with ctx's error when ctx ends first. A root
// process checks the state directory's ownership (see AcquireLockWith).
func AcquireLock(ctx context.Context, dir string, wait time.Duration) (*Lock, error) {
	return AcquireLockWith(ctx, dir, LockOptions{Wait: wait, SkipOwnershipCheck: os.Geteuid() != 0})
}

// AcquireLockAs is AcquireLock that also records holder (one word, e.g.
// HolderWatch) beside the pid, so that a run that cannot get the lock can
// tell people what holds it.
func AcquireLockAs(ctx context.Context, dir string, wait time.Duration, holder string) (*Lock, error) {
	return AcquireLockWith(ctx, dir, LockOptions{Wait: wait, Holder: holder, SkipOwnershipCheck: os.Geteuid() != 0})
}

// AcquireLockWith takes the state lock in dir as o says. Every run that
// changes the system takes it before reading the state file, so it is
// where the state directory is checked: unless o.SkipOwnershipCheck, a
// directory or state file that is not root's or that group or others can
// write is refused with a *state.OwnershipError (whoever can write the
// state decides what macake deletes and which pf reference it releases).
// A missing directory is created 0755, owned by the caller (root).
func AcquireLockWith(ctx context.Context, dir string, o LockOptions) (*Lock, error) {
	wait, holder := o.Wait, o.Holder
	if !o.SkipOwnershipCheck {
		// Before the lock file is opened: in a directory others can
		// write, it could be a symlink to a file root would truncate.
		if err := state.CheckOwnership(dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	path := filepath.Join(dir, o.name())
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	start := time.Now()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(lockPoll)
	defer tick.Stop()
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if ok {
			l := &Lock{f: f}
			if err := l.writeHolder(holder); err != nil {
				l.Release()
				return nil, fmt.Errorf("writing the lock file %s: %w", path, err)
			}
			return l, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-deadline.C:
			pid, who := readHolder(path)
			f.Close()
			return nil, &LockedError{Path: path, PID: pid, Holder: who, Waited: time.Since(start)}
		case <-tick.C:
		}
	}
}

// writeHolder writes "PID" or "PID HOLDER" and a newline.
func (l *Lock) writeHolder(holder string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	line := strconv.Itoa(os.Getpid())
	if holder != "" {
		line += " " + holder
	}
	_, err := l.f.WriteAt([]byte(line+"\n"), 0)
	return err
}

// readHolder returns the pid and the holder's name as the holder wrote
// them; 0 and "" when there are none yet.
func readHolder(path string) (pid int, holder string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, ""
	}
	return parseHolder(string(b))
}

// parseHolder reads the lock file's "PID" or "PID HOLDER" line.
func parseHolder(s string) (pid int, holder string) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0, ""
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return 0, ""
	}
	if len(fields) > 1 {
		holder = fields[1]
	}
	return pid, holder
}

// Holder tells, without taking it, whether the state lock in dir is held
// and by whom: the pid and holder name as AcquireLockAs wrote them. It
// needs only read access to the lock file, so a user who may not ask the
// daemon over its socket can still learn that it runs. A missing lock
// file is a lock nobody holds.
func Holder(dir string) (pid int, holder string, held bool, err error) {
	return HolderOf(dir, LockFileName)
}

// HolderOf is Holder for the lock file name in dir (SelftestLockName).
func HolderOf(dir, name string) (pid int, holder string, held bool, err error) {
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("opening the lock file: %w", err)
	}
	defer f.Close()
	free, err := tryLockShared(f)
	if err != nil {
		return 0, "", false, fmt.Errorf("probing %s: %w", path, err)
	}
	if free {
		unlock(f)
		return 0, "", false, nil
	}
	pid, holder = readHolder(path)
	return pid, holder, true, nil
}

// Release lets go of the lock. The file stays (removing it would race with
// a waiter that has it open).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	unlock(l.f)
	err := l.f.Close()
	l.f = nil
	return err
}
