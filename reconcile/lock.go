// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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

// LockedError says that another process holds the state lock.
type LockedError struct {
	// Path is the lock file.
	Path string
	// PID is the holder's process id as it wrote it; 0 when unknown.
	PID int
	// Waited is how long this run waited.
	Waited time.Duration
}

// Error names the holder and what to do.
func (e *LockedError) Error() string {
	holder := "another macake process"
	if e.PID > 0 {
		holder = fmt.Sprintf("another macake process (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s is changing pf/dummynet and still holds %s after %s; wait for it to finish (or stop it) and try again",
		holder, e.Path, e.Waited.Round(100*time.Millisecond))
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

// AcquireLock takes the state lock in dir (created if needed), waiting up
// to wait for another holder to let go. It fails with a *LockedError when
// the wait runs out, or with ctx's error when ctx ends first.
func AcquireLock(ctx context.Context, dir string, wait time.Duration) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
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
			if err := l.writePID(); err != nil {
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
			pid := readPID(path)
			f.Close()
			return nil, &LockedError{Path: path, PID: pid, Waited: time.Since(start)}
		case <-tick.C:
		}
	}
}

func (l *Lock) writePID() error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// readPID returns the pid the holder wrote, 0 when there is none yet.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
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
