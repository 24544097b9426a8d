// SPDX-License-Identifier: Apache-2.0

// Package configwatch watches the policy directory for `macake watch`:
// it signals every event that may change the policies (Watch), following
// the directory's real path and surviving its loss, and says how long a
// burst of an editor's events is let settle (DefaultDebounceQuiet,
// DefaultDebounceMax).
package configwatch

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/macake/macake/internal/debounce"
	"github.com/macake/macake/logging"
)

// Debounce timing of policy file events (style-and-ux §10): editors save
// in bursts (write a temporary file, rename it over the old one, chmod),
// so the directory is re-read once the burst has been quiet for
// DefaultDebounceQuiet, and at the latest DefaultDebounceMax after its
// first event, so a file rewritten without pause is still picked up. The
// events of one save arrive within a few milliseconds of each other, so
// 50 ms of quiet ends a burst; a longer wait only delays every save.
const (
	// DefaultDebounceQuiet is the quiet that ends a burst.
	DefaultDebounceQuiet = 50 * time.Millisecond
	// DefaultDebounceMax is the longest a burst delays a re-read.
	DefaultDebounceMax = 2 * time.Second
)

// policyEvent reports whether an fsnotify event may change the policies:
// a create, write, remove or rename of a policy file (*.toml, not hidden:
// config.Load's rule). Chmod alone never does: Spotlight, backups and
// anti-virus tools touch modes all day, and on kqueue a truncation arrives
// as Chmod followed by Write anyway.
func policyEvent(ev fsnotify.Event) bool {
	if ev.Op&^fsnotify.Chmod == 0 {
		return false
	}
	name := filepath.Base(ev.Name)
	return strings.HasSuffix(name, ".toml") && !strings.HasPrefix(name, ".")
}

// Re-adding a lost directory backs off from rewatchMin to rewatchMax.
const (
	rewatchMin = 500 * time.Millisecond
	rewatchMax = 30 * time.Second
)

// Watch signals (undebounced) every event in dir that may change
// the policies, until ctx ends. It watches the directory's real path (on
// macOS /etc is a symlink to /private/etc, and kqueue follows symlinks only
// for the path given to Add), never the files: editors replace files by
// renaming a new one over them, which would end a watch on the old inode.
//
// It survives losing the directory: when the directory is removed or
// renamed, or cannot be watched at all, it retries with backoff and
// signals once the watch is back (the directory may have changed
// meanwhile). Trouble is logged to log; the daemon's periodic resync
// covers whatever a missing watch misses.
func Watch(ctx context.Context, dir string, log *slog.Logger) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		backoff := rewatchMin
		reported := ""
		for first := true; ; first = false {
			w, real, err := watchDir(dir)
			if err != nil {
				if err.Error() != reported {
					reported = err.Error()
					log.Warn("cannot watch the policy directory; re-reading it every drift interval until it can be watched", logging.KeyError, err, "dir", dir)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, rewatchMax)
				continue
			}
			if reported != "" {
				log.Info("watching the policy directory again", "dir", real)
				reported = ""
			}
			backoff = rewatchMin
			if !first {
				debounce.Signal(out)
			}
			lost := follow(ctx, w, real, out, log)
			w.Close()
			if !lost {
				return
			}
			debounce.Signal(out)
		}
	}()
	return out
}

// watchDir starts a watch on dir's real path.
func watchDir(dir string) (*fsnotify.Watcher, string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, "", err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, "", err
	}
	if err := w.Add(real); err != nil {
		w.Close()
		return nil, "", err
	}
	return w, real, nil
}

// follow forwards w's policy events to out until ctx ends (false) or the
// directory itself goes away (true).
func follow(ctx context.Context, w *fsnotify.Watcher, dir string, out chan<- struct{}, log *slog.Logger) (lost bool) {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-w.Events:
			if !ok {
				return true
			}
			if ev.Name == dir && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				log.Warn("the policy directory was removed or renamed; keeping the last good policies and watching for it to return", "dir", dir)
				return true
			}
			if policyEvent(ev) {
				debounce.Signal(out)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return true
			}
			// An overflow means events were lost: re-read to be sure.
			log.Warn("policy directory watch", logging.KeyError, err, "dir", dir)
			debounce.Signal(out)
		}
	}
}
