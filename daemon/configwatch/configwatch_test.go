// SPDX-License-Identifier: Apache-2.0

package configwatch

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// waitSignal waits up to 5 s for a signal on ch.
func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("no signal after %s", what)
	}
}

// noSignal checks that ch stays quiet for a moment.
func noSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("a signal after %s", what)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestWatchConfigDir watches a real directory through a symlink (as
// /etc/macake is on macOS): writes, atomic saves and removals of policy
// files signal; other files and chmod alone do not; the watch survives the
// directory being removed and re-created.
func TestWatchConfigDir(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "private", "links.d")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "links.d")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := Watch(ctx, link, slog.New(slog.NewTextHandler(io.Discard, nil)))
	time.Sleep(50 * time.Millisecond) // the watch is installed by a goroutine
	file := filepath.Join(link, "wan.toml")

	os.WriteFile(file, []byte("x"), 0o644)
	waitSignal(t, ch, "creating a policy file")
	drain(ch)
	os.Chmod(file, 0o600)
	noSignal(t, ch, "a chmod")
	os.WriteFile(filepath.Join(link, "notes.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(link, ".wan.toml.swp"), []byte("x"), 0o644)
	noSignal(t, ch, "writing files that are not policies")
	tmp := filepath.Join(link, ".wan.toml.tmp123")
	os.WriteFile(tmp, []byte("y"), 0o644)
	os.Rename(tmp, file) // an editor's atomic save
	waitSignal(t, ch, "an atomic save")
	drain(ch)
	os.Remove(file)
	waitSignal(t, ch, "removing a policy file")
	drain(ch)

	// Lose the directory, get it back.
	if err := os.RemoveAll(real); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "removing the directory")
	drain(ch)
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "the directory coming back")
	drain(ch)
	os.WriteFile(file, []byte("z"), 0o644)
	waitSignal(t, ch, "writing a policy file in the new directory")
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
			return
		}
	}
}
