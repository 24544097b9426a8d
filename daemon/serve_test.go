// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/config"
	"github.com/macake/macake/internal/syncbuf"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

// serveOptions runs Serve on the pf emulator, an empty policy directory
// and a facts file, logging into log.
func serveOptions(t *testing.T, log io.Writer) ServeOptions {
	t.Helper()
	dir := t.TempDir()
	facts := filepath.Join(dir, "facts.json")
	if err := os.WriteFile(facts, []byte(`{"interfaces":[{"name":"en0","up":true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	configDir := filepath.Join(dir, "links.d")
	if err := os.Mkdir(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Not the default state directory: it must exist (MayCreate).
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{backend.EnvBackend: "pf", linkfacts.EnvFile: facts}
	return ServeOptions{
		ConfigDir: configDir, StateDir: filepath.Join(dir, "state"),
		LoadOptions: config.LoadOptions{SkipOwnershipCheck: true}, BackendName: "pf",
		Runner: pfdntest.New(), Getenv: func(k string) string { return env[k] },
		Stderr: log, LockWait: 50 * time.Millisecond, Version: "test",
	}
}

func TestServeRunsUntilStopped(t *testing.T) {
	var log syncbuf.Buffer
	o := serveOptions(t, &log)
	o.StartFailed = func(err error) { t.Errorf("StartFailed(%v)", err) }
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := Serve(ctx, o); err != nil {
		t.Fatalf("Serve: %v\n%s", err, log.String())
	}
	for _, want := range []string{`msg="watch started"`, "version=test", `msg="watch stopped; shaping left in place`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	// The lock is released: the next watch starts at once.
	l, err := state.AcquireLock(context.Background(), o.StateDir, state.LockOptions{SkipOwnershipCheck: true})
	if err != nil {
		t.Fatalf("lock still held after Serve: %v", err)
	}
	l.Release()
}

// A second watch says it waits, then that one is running, and the error
// it returns is the one it gave StartFailed; one stopped while it waits
// exits cleanly.
func TestServeWhileAnotherWatchRuns(t *testing.T) {
	var log syncbuf.Buffer
	o := serveOptions(t, &log)
	l, err := state.AcquireLock(context.Background(), o.StateDir, state.LockOptions{Holder: state.HolderWatch, SkipOwnershipCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	var failed error
	o.StartFailed = func(err error) { failed = err }
	err = Serve(context.Background(), o)
	if err == nil || !errors.Is(failed, err) || !strings.Contains(err.Error(), "only one watch runs at a time") {
		t.Errorf("Serve: %v; StartFailed got %v", err, failed)
	}
	for _, want := range []string{`msg="the state lock is held; waiting for it" holder=watch`, `msg="cannot take the state lock"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}

	failed = nil
	o.LockWait = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := Serve(ctx, o); err != nil || failed != nil {
		t.Errorf("stopped while waiting: %v, StartFailed got %v", err, failed)
	}
}

func TestAnotherWatch(t *testing.T) {
	for goos, restart := range map[string]string{"darwin": "launchctl kickstart -k system/org.macake.watch", "linux": "systemctl restart macake-watch"} {
		if msg := anotherWatch(7, goos).Error(); !strings.Contains(msg, restart) {
			t.Errorf("%s: %q lacks %q", goos, msg, restart)
		}
	}
}

// TestCapStderrFile: the launchd stderr file is emptied once past its cap,
// and left alone below it.
func TestCapStderrFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.stderr.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Write(bytes.Repeat([]byte("x"), 100))
	capStderrFile(f, 1000, log)
	if info, _ := os.Stat(path); info.Size() != 100 {
		t.Fatalf("a small file was changed: %d bytes", info.Size())
	}
	f.Write(bytes.Repeat([]byte("x"), 1000))
	capStderrFile(f, 1000, log)
	f.Write([]byte("next\n"))
	if b, _ := os.ReadFile(path); string(b) != "next\n" {
		t.Fatalf("after the cap: %q", b)
	}
}

// TestServeRefusesAMissingStateDir: watch creates only the default state
// directory; a --state-dir that does not exist (a typo) fails the start,
// naming it, rather than keep a second record of what macake owns.
func TestServeRefusesAMissingStateDir(t *testing.T) {
	var log syncbuf.Buffer
	o := serveOptions(t, &log)
	o.StateDir += "-typo"
	var failed error
	o.StartFailed = func(err error) { failed = err }
	err := Serve(context.Background(), o)
	var missing *state.MissingStateDirError
	if !errors.As(err, &missing) || missing.Dir != o.StateDir || failed == nil {
		t.Fatalf("Serve: %v (StartFailed %v)", err, failed)
	}
	if _, err := os.Stat(o.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("watch created %s: %v", o.StateDir, err)
	}
	o.StateDirIsDefault = true // the default, or state_dir in macake.toml: created
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	o.StartFailed = func(err error) { t.Errorf("StartFailed(%v)", err) }
	if err := Serve(ctx, o); err != nil {
		t.Fatalf("Serve with the default directory: %v", err)
	}
}
