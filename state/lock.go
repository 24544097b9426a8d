// SPDX-License-Identifier: Apache-2.0

package state

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

	"github.com/macake/macake/internal/safefile"
)

// LockFileName is the lock file inside the state directory. It is root's
// alone (mode 0600): any user who may open a file may flock it, and a
// shared lock held by anyone would block every apply, down and watch.
const LockFileName = "macake.lock"

// HolderFileName is the file beside the lock in which its holder writes
// "PID" or "PID HOLDER" for those who may not open the lock (mode 0644):
// status and doctor run by a user learn from it that watch runs.
const HolderFileName = "macake.pid"

// DefaultLockWait is how long a mutating run waits for another to finish
// before giving up: long enough for any apply, short enough that a person
// is not left staring at a silent terminal.
const DefaultLockWait = 3 * time.Second

// lockPoll is how often a waiting run retries the lock.
const lockPoll = 50 * time.Millisecond

// ErrLocked is matched (errors.Is) by a *LockedError.
var ErrLocked = errors.New("another macake run holds the lock")

// HolderWatch names the daemon as the lock's holder (LockOptions.Holder): it
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
	// Blocker, when set, is what actually holds the lock when that is
	// not the macake run PID names (another user's process, or a run
	// long gone whose pid is still written there).
	Blocker *LockBlocker
}

// LockBlocker is a process that holds the state lock but is not a macake
// run that took it.
type LockBlocker struct {
	// PID is the process holding it; 0 when the system does not say
	// (macOS keeps flock holders to itself).
	PID int
	// UID is its owner; -1 when unknown.
	UID int
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
	if b := e.Blocker; b != nil {
		if b.PID == 0 {
			gone := ""
			if e.PID > 0 {
				gone = fmt.Sprintf(" (pid %d, which wrote it last, is gone)", e.PID)
			}
			return fmt.Sprintf("the state lock %s is held, but not by a macake run%s: another program holds it and blocks every apply, down and watch; find it with 'sudo lsof %s' and stop it",
				e.Path, gone, e.Path)
		}
		who := fmt.Sprintf("pid %d", b.PID)
		if b.UID > 0 {
			who += fmt.Sprintf(", uid %d (not root)", b.UID)
		}
		return fmt.Sprintf("the state lock %s is held by %s, which is not a macake run: it blocks every apply, down and watch; stop it (sudo kill %d) and try again",
			e.Path, who, b.PID)
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
	f          *os.File
	holderFile string
	// unrecorded says what could not be written (LockOptions.Unrecorded).
	unrecorded error
}

// Unrecorded is what a lock taken with LockOptions.Unrecorded could not
// write to the state directory (its pid, or the lock file itself), nil
// when it wrote everything. The run's own state file writes will fail
// the same way.
func (l *Lock) Unrecorded() error {
	if l == nil {
		return nil
	}
	return l.unrecorded
}

// LockOptions tune AcquireLock.
type LockOptions struct {
	// Wait is how long to wait for another holder to let go.
	Wait time.Duration
	// Holder is recorded beside the pid (one word, e.g. HolderWatch), so
	// that a run that cannot get the lock can tell people what holds it.
	Holder string
	// MayCreate lets the run create a state directory that does not
	// exist. Only the default one (no --state-dir, or state_dir in
	// macake.toml) is created unasked: a mistyped --state-dir would
	// otherwise start a second record of what macake owns, adopt the live
	// pipes and take a second pf reference that the right one never
	// releases. Otherwise a missing directory is a *MissingStateDirError.
	MayCreate bool
	// SkipOwnershipCheck turns off CheckOwnership of the state
	// directory and file (root-owned, not writable by group or others),
	// for tests and for runs by a user other than root, as
	// config.LoadOptions.SkipOwnershipCheck does for the config directory.
	SkipOwnershipCheck bool
	// Name is the lock file inside the state directory; "" is
	// LockFileName. Another name is another lock: `macake selftest` keeps
	// its own (SelftestLockName), so it never waits for, nor blocks, apply.
	Name string
	// Unrecorded lets the run go on when the state directory's disk takes
	// no write (read-only, full, over quota: Unwritable): the lock is
	// taken on a read-only descriptor of the lock file, and when there is
	// none and none can be made, not at all (no other run can hold a lock
	// file that does not exist). For `down`, the off switch, which must
	// remove the shaping even then (issue 27); Lock.Unrecorded says what
	// was not written.
	Unrecorded bool
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

// holderFileOf is the holder file of the lock file name: HolderFileName
// for the state lock, NAME.pid for another (selftest.lock: selftest.pid),
// so that each lock's holder keeps its own and releasing one lock never
// removes the other's.
func holderFileOf(name string) string {
	if name == LockFileName {
		return HolderFileName
	}
	return strings.TrimSuffix(name, ".lock") + ".pid"
}

// MissingStateDirError says that the state directory does not exist and
// the run may not create it (LockOptions.MayCreate).
type MissingStateDirError struct {
	Dir string
}

// Error names the directory, why it is not created, and the fix.
func (e *MissingStateDirError) Error() string {
	return fmt.Sprintf("the state directory %s does not exist; nothing was changed. macake creates only its default one by itself: "+
		"under a mistyped --state-dir it would keep a second record of what it owns (on macOS, with a second pf reference). "+
		"Check the path; if it is a new state directory, create it first: sudo mkdir -m 0755 %s", e.Dir, e.Dir)
}

// AcquireLock takes the state lock in dir as o says, waiting up to o.Wait
// for another holder to let go. It fails with a *LockedError when the wait
// runs out, or with ctx's error when ctx ends first. Every run that
// changes the system takes it before reading the state file, so it is
// where the state directory is checked: unless o.SkipOwnershipCheck, a
// directory or state file that is not root's or that group or others can
// write is refused with a *OwnershipError (whoever can write the
// state decides what macake deletes and which pf reference it releases).
// A missing directory is created 0755, owned by the caller (root).
func AcquireLock(ctx context.Context, dir string, o LockOptions) (*Lock, error) {
	wait, holder := o.Wait, o.Holder
	if !o.SkipOwnershipCheck {
		// Before the lock file is opened: in a directory others can
		// write, it could be a symlink to a file root would truncate.
		if err := CheckOwnership(dir); err != nil {
			return nil, err
		}
	}
	if !o.MayCreate {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, &MissingStateDirError{Dir: dir}
		}
	}
	var unrecorded error
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if !o.Unrecorded || !Unwritable(err) {
			return nil, fmt.Errorf("creating the state directory: %w", err)
		}
		return &Lock{unrecorded: fmt.Errorf("creating the state directory: %w", err)}, nil
	}
	path := filepath.Join(dir, o.name())
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if err != nil && o.Unrecorded && Unwritable(err) {
		unrecorded = fmt.Errorf("opening the lock file: %w", err)
		f, err = os.OpenFile(path, os.O_RDONLY|noFollow, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return &Lock{unrecorded: unrecorded}, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	// A lock file an older macake made 0644 becomes root's alone, so no
	// one else can open it from now on.
	if info, err := f.Stat(); err == nil && info.Mode().Perm() != 0o600 {
		if err := f.Chmod(0o600); err != nil && !(o.Unrecorded && Unwritable(err)) {
			f.Close()
			return nil, fmt.Errorf("making the lock file %s private: %w", path, err)
		}
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
			l := &Lock{f: f, holderFile: filepath.Join(dir, holderFileOf(o.name())), unrecorded: unrecorded}
			if unrecorded != nil {
				return l, nil
			}
			if err := l.writeHolder(holder); err != nil {
				if o.Unrecorded && Unwritable(err) {
					l.unrecorded = fmt.Errorf("writing the lock file %s: %w", path, err)
					return l, nil
				}
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
			blocker := lockBlocker(f, pid)
			f.Close()
			return nil, &LockedError{Path: path, PID: pid, Holder: who, Waited: time.Since(start), Blocker: blocker}
		case <-tick.C:
		}
	}
}

// writeHolder writes "PID" or "PID HOLDER" and a newline into the lock
// file and the holder file.
func (l *Lock) writeHolder(holder string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	line := strconv.Itoa(os.Getpid())
	if holder != "" {
		line += " " + holder
	}
	if _, err := l.f.WriteAt([]byte(line+"\n"), 0); err != nil {
		return err
	}
	return safefile.WriteAtomic(l.holderFile, []byte(line+"\n"), 0o644)
}

// lockBlocker finds out whether the lock on f, which this run could not
// take, is held by something other than the macake run recorded as pid:
// the system's list of lock holders where it has one (Linux), else
// whether pid still runs.
func lockBlocker(f *os.File, pid int) *LockBlocker {
	if holders, ok := flockHolders(f); ok {
		for _, h := range holders {
			if h.PID != pid || h.UID > 0 {
				return &h
			}
		}
		return nil
	}
	if pid <= 0 || !alive(pid) {
		return &LockBlocker{UID: -1}
	}
	return nil
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
// and by whom: the pid and holder name as AcquireLock wrote them. Root
// probes the lock itself; a user, who may not open it, reads the holder
// file (HolderFileName) and asks whether that process runs, so that one
// who may not ask the daemon over its socket can still learn that it
// runs. A missing lock file is a lock nobody holds.
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
	if errors.Is(err, fs.ErrPermission) {
		pid, holder, held = holderFromFile(dir, name)
		return pid, holder, held, nil
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

// holderFromFile is HolderOf for a user who may not open the lock, which is
// root's alone: the holder file says who took it, and the process table
// whether that one still runs.
func holderFromFile(dir, name string) (pid int, holder string, held bool) {
	pid, holder = readHolder(filepath.Join(dir, holderFileOf(name)))
	if pid > 0 && alive(pid) {
		return pid, holder, true
	}
	return 0, "", false
}

// Release lets go of the lock. The lock file stays (removing it would race
// with a waiter that has it open); the holder file goes.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	if l.unrecorded != nil {
		// The holder file is another run's, or none.
		unlock(l.f)
		err := l.f.Close()
		l.f = nil
		return err
	}
	os.Remove(l.holderFile)
	unlock(l.f)
	err := l.f.Close()
	l.f = nil
	return err
}
