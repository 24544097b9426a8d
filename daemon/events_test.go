// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/sense/linkfacts"
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
	ch := WatchConfigDir(ctx, link, slog.New(slog.NewTextHandler(io.Discard, nil)))
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

// scriptedFacts returns the facts (or errors) of a script, one per call.
type scriptedFacts struct {
	mu    sync.Mutex
	steps []func() (linkfacts.Facts, error)
}

func (s *scriptedFacts) Facts(context.Context) (linkfacts.Facts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	step := s.steps[0]
	if len(s.steps) > 1 {
		s.steps = s.steps[1:]
	}
	return step()
}

// TestLinkFactsWatch: the daemon's facts watcher (linkfacts.Watch through
// the LinkFacts adapter) reports the first read as the start event, and a
// change, an error and the recovery as one event each; unchanged reads
// make none. linkfacts' own tests cover debouncing and sleep detection.
func TestLinkFactsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		home, hotel := factsOn("en0", homeMAC), factsOn("en0", hotelMAC)
		ok := func(f linkfacts.Facts) func() (linkfacts.Facts, error) {
			return func() (linkfacts.Facts, error) { return f, nil }
		}
		src := &scriptedFacts{steps: []func() (linkfacts.Facts, error){
			ok(home), ok(home), ok(hotel), ok(hotel),
			func() (linkfacts.Facts, error) { return linkfacts.Facts{}, errors.New("facts file is gone") },
			ok(hotel),
		}}
		ch := LinkFacts{Source: src, Config: linkfacts.WatchConfig{Poll: time.Second}}.Watch(t.Context())
		var got []string
		for range 4 {
			var ev FactsEvent
			select {
			case ev = <-ch:
			case <-time.After(time.Minute):
				t.Fatalf("events so far %q; no more", got)
			}
			s := ev.Reason
			if ev.Err != nil {
				s += ": " + ev.Err.Error()
			}
			got = append(got, s)
		}
		want := []string{"start", "poll", "error: facts file is gone", "poll"}
		if !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		time.Sleep(3 * time.Second)
		select {
		case ev := <-ch:
			t.Fatalf("an event without a change: %+v", ev)
		default:
		}
	})
}
