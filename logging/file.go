// SPDX-License-Identifier: Apache-2.0

package logging

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/macake/macake/internal/fileowner"
)

// Defaults for a log file: with both, the log never takes more than about
// 60 MB (the current file plus five old ones), which at the daemon's usual
// rate of a few lines a minute holds weeks of history.
const (
	DefaultMaxBytes = 10 << 20
	DefaultKeep     = 5
)

// File modes for what OpenFile creates: the log is readable by everyone
// (as /var/log files are), writable by its owner only.
const (
	fileMode = 0o644
	dirMode  = 0o755
)

// FileOptions tunes a rotating log file. The zero value uses the defaults.
type FileOptions struct {
	// MaxBytes is the size cap: a line that would take the file past it
	// goes to a fresh file instead. A single line longer than the cap is
	// still written whole, to a file of its own. 0 means DefaultMaxBytes.
	MaxBytes int64
	// Keep is how many old files to keep (PATH.1 newest … PATH.Keep
	// oldest); older ones are deleted. 0 means DefaultKeep.
	Keep int
	// CrashOutput also sends Go runtime crash reports (an unrecovered
	// panic, a fatal error) to the current file, re-pointed at every
	// rotation, so the trace of a crashed daemon is in the log people read
	// rather than only on standard error. It is process-wide
	// (runtime/debug.SetCrashOutput): set it on the daemon's one log file.
	CrashOutput bool
	// CheckOwnership refuses a log file whose directory, or a directory
	// above it, someone other than root could change, or an existing file
	// that is not root's or others may write: the checks the state
	// directory gets (fileowner.UnsafeDir), for a daemon run as root. A
	// run by another user skips them, as it skips the state directory's.
	CheckOwnership bool
	// OnError hears about a rotation that failed. Writing carries on into
	// the current file (no line is lost) and rotation is tried again once
	// another MaxBytes has been written. It is called from the Write that
	// met the failure, after the file's lock is released, so it may write
	// to this file, but not through the slog handler whose Write is in
	// progress (slog handlers hold a lock while writing): use a handler of
	// its own, as New does. nil reports on standard error.
	OnError func(error)
}

// File is an append-only log file that rotates itself: when the next line
// would take it past its size cap, PATH is renamed to PATH.1 (PATH.1 to
// PATH.2, and so on, the oldest beyond Keep deleted) and a new PATH is
// opened. Each Write is treated as one line and never split across files,
// so hand it whole lines, as log/slog's handlers do. Safe for concurrent
// use; rotation happens under the same lock as writes.
//
// launchd does not rotate the files it sends a job's output to, and
// newsyslog can only rename them under a process that keeps writing to the
// old descriptor, hence rotation in-process. Reopen serves external
// rotators (newsyslog, logrotate) that rename the file and then signal.
type File struct {
	path     string
	maxBytes int64
	keep     int
	crash    bool
	onError  func(error)

	mu   sync.Mutex
	f    *os.File
	size int64
	// retryAt is the size below which a failed rotation is not tried
	// again, so a persistent failure costs one attempt per MaxBytes
	// written, not one per line.
	retryAt int64
	closed  bool
	// pending is a problem met under the lock, reported to onError once
	// the lock is released (onError may write to this file).
	pending error
}

// OpenFile opens (creating it and its directory if needed) the log file at
// path for appending. A new directory gets mode 0755 and a new file 0644,
// whatever the umask.
func OpenFile(path string, opts FileOptions) (*File, error) {
	if path == "" {
		return nil, errors.New("log file: empty path")
	}
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("log file %s: size cap %d is negative", path, opts.MaxBytes)
	}
	if opts.Keep < 0 {
		return nil, fmt.Errorf("log file %s: cannot keep %d old files", path, opts.Keep)
	}
	lf := &File{path: path, maxBytes: opts.MaxBytes, keep: opts.Keep, crash: opts.CrashOutput, onError: opts.OnError}
	if lf.maxBytes == 0 {
		lf.maxBytes = DefaultMaxBytes
	}
	if lf.keep == 0 {
		lf.keep = DefaultKeep
	}
	if lf.onError == nil {
		lf.onError = func(err error) { fmt.Fprintf(os.Stderr, "macake: %v\n", err) }
	}
	if opts.CheckOwnership {
		if err := checkOwnership(path); err != nil {
			return nil, err
		}
	}
	if err := makeDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	f, size, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	lf.f, lf.size = f, size
	lf.pointCrashOutput()
	lf.report()
	return lf, nil
}

// checkOwnership refuses a log file at path that someone other than root
// could redirect or read from: a directory at or above it that is not
// root's alone (in a shared directory, a user's file or link put where the
// log goes would have root append to it), or an existing file that is not
// a regular file owned by root and writable by root alone.
func checkOwnership(path string) error {
	if dir, problem := fileowner.UnsafeDir(filepath.Dir(path)); dir != "" {
		return fmt.Errorf("log file %s: the directory %s is %s; keep the log in a directory only root can write, such as /var/log/macake (or fix it: sudo chown root %s && sudo chmod go-w %s)",
			path, dir, problem, dir, dir)
	}
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("log file %s: %w", path, err)
	case info.Mode().Type() == fs.ModeSymlink:
		return fmt.Errorf("log file %s is a symbolic link; name the file itself", path)
	case !info.Mode().IsRegular():
		return fmt.Errorf("log file %s: not a regular file (%s)", path, info.Mode().Type())
	}
	if uid, _, ok := fileowner.Of(info); ok && uid != 0 {
		return fmt.Errorf("log file %s is owned by uid %d, not root: remove it (sudo rm %s), and watch creates its own", path, uid, path)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("log file %s is writable by group or others (mode %04o): sudo chmod go-w %s", path, perm, path)
	}
	return nil
}

// makeDir creates dir (and its parents) with mode 0755 when it is missing.
func makeDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	// MkdirAll's mode is filtered by the umask; a daemon started with a
	// strict umask would otherwise make its logs unreadable to admins.
	if err := os.Chmod(dir, dirMode); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	return nil
}

// openAppend opens path for appending, creating it with mode 0644, and
// returns its current size. It never follows a symbolic link at path.
func openAppend(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL|noFollow, fileMode)
	switch {
	case err == nil:
		// A file we created: give it 0644 whatever the umask. An existing
		// file keeps the mode its owner chose.
		if err := f.Chmod(fileMode); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("open log file: %w", err)
		}
		return f, 0, nil
	case errors.Is(err, fs.ErrExist):
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|noFollow, 0)
	}
	if err != nil {
		if info, lerr := os.Lstat(path); lerr == nil && info.Mode().Type() == fs.ModeSymlink {
			return nil, 0, fmt.Errorf("open log file: %s is a symbolic link, which macake does not follow; name the file itself", path)
		}
		return nil, 0, fmt.Errorf("open log file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("open log file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("open log file %s: not a regular file", path)
	}
	return f, fi.Size(), nil
}

// Path returns the file's path.
func (lf *File) Path() string { return lf.path }

// Write appends p, rotating first if p would take the file past its cap.
// p is written with one write call, so concurrent writers (and launchd's
// own descriptor on the same file, which also appends) never interleave
// inside a line.
func (lf *File) Write(p []byte) (int, error) {
	lf.mu.Lock()
	if lf.closed {
		lf.mu.Unlock()
		return 0, fs.ErrClosed
	}
	if lf.size > 0 && lf.size+int64(len(p)) > lf.maxBytes && lf.size >= lf.retryAt {
		if err := lf.rotateLocked(); err != nil {
			lf.retryAt = lf.size + lf.maxBytes
			lf.pending = errors.Join(lf.pending, err)
		}
	}
	n, err := lf.f.Write(p)
	lf.size += int64(n)
	lf.mu.Unlock()
	lf.report()
	return n, err
}

// report hands a pending problem to onError. Called without the lock.
func (lf *File) report() {
	lf.mu.Lock()
	err := lf.pending
	lf.pending = nil
	lf.mu.Unlock()
	if err != nil {
		lf.onError(err)
	}
}

// whileOpen runs f with the lock held, unless the file is closed
// (fs.ErrClosed), and then hands a pending problem to onError.
func (lf *File) whileOpen(f func() error) error {
	defer lf.report()
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.closed {
		return fs.ErrClosed
	}
	return f()
}

// Rotate rotates now, whatever the size; an empty file is left alone.
func (lf *File) Rotate() error {
	return lf.whileOpen(func() error {
		if lf.size == 0 {
			return nil
		}
		return lf.rotateLocked()
	})
}

// Reopen closes the descriptor and opens PATH again, creating it if an
// external rotator moved it away. Call it on SIGHUP.
func (lf *File) Reopen() error {
	return lf.whileOpen(lf.reopenLocked)
}

// reopenLocked is Reopen with the lock held.
func (lf *File) reopenLocked() error {
	if err := makeDir(filepath.Dir(lf.path)); err != nil {
		return err
	}
	f, size, err := openAppend(lf.path)
	if err != nil {
		return err
	}
	lf.f.Close()
	lf.f, lf.size, lf.retryAt = f, size, 0
	lf.pointCrashOutput()
	return nil
}

// Close closes the file; later writes fail with fs.ErrClosed.
func (lf *File) Close() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.closed {
		return nil
	}
	lf.closed = true
	if lf.crash {
		// Stop sending crash reports to a file nobody owns any more.
		debug.SetCrashOutput(nil, debug.CrashOptions{})
	}
	return lf.f.Close()
}

// oldName is the path of the n-th old file.
func (lf *File) oldName(n int) string { return lf.path + "." + strconv.Itoa(n) }

// rotateLocked shifts the old files up by one, moves PATH to PATH.1 and
// opens a new PATH. On failure the current descriptor stays in use, so
// nothing is lost; the file just grows until the next attempt works.
func (lf *File) rotateLocked() error {
	if err := os.Remove(lf.oldName(lf.keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotate log file: %w", err)
	}
	for n := lf.keep - 1; n >= 1; n-- {
		if err := os.Rename(lf.oldName(n), lf.oldName(n+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate log file: %w", err)
		}
	}
	if err := os.Rename(lf.path, lf.oldName(1)); err != nil {
		return fmt.Errorf("rotate log file: %w", err)
	}
	f, size, err := openAppend(lf.path)
	if err != nil {
		// Put the current file back so PATH stays the live log; writing
		// continues through the old descriptor either way.
		if rerr := os.Rename(lf.oldName(1), lf.path); rerr != nil {
			return fmt.Errorf("rotate log file: %w (and moving it back: %v)", err, rerr)
		}
		return fmt.Errorf("rotate log file: %w", err)
	}
	lf.f.Close()
	lf.f, lf.size, lf.retryAt = f, size, 0
	lf.pointCrashOutput()
	// Files beyond Keep are left over from a larger Keep; delete them so
	// lowering Keep frees the space.
	for n := lf.keep + 1; ; n++ {
		if err := os.Remove(lf.oldName(n)); err != nil {
			break
		}
	}
	return nil
}

// pointCrashOutput sends runtime crash reports to the current file. A
// failure is only reported: crash reports still reach standard error.
func (lf *File) pointCrashOutput() {
	if !lf.crash {
		return
	}
	if err := debug.SetCrashOutput(lf.f, debug.CrashOptions{}); err != nil {
		lf.pending = errors.Join(lf.pending, fmt.Errorf("send crash reports to %s: %w", lf.path, err))
	}
}
