// SPDX-License-Identifier: Apache-2.0

package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
)

// TestLastGoodCopyIsWhatWasAccepted: the copy holds the version of the
// file that was accepted, never one an editor wrote in between, and a
// broken or foreign copy is no fallback.
func TestLastGoodCopyIsWhatWasAccepted(t *testing.T) {
	dir, stateDir := t.TempDir(), t.TempDir()
	opts := config.LoadOptions{SkipOwnershipCheck: true}
	file := filepath.Join(dir, "cable.toml")
	good := configtest.Policy{Interface: "en0", Mode: "fixed", Download: "50mbit", Upload: "5mbit"}.TOML()
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(file, good)
	l, _, err := config.Parse(file, []byte(good), opts)
	if err != nil {
		t.Fatal(err)
	}

	// Accepted, then rewritten before the copy is made: no copy of
	// either, the next pass deals with the new version.
	s := NewLastGoodStore(stateDir)
	write(file, strings.Replace(good, "50mbit", "60mbit", 1))
	if err := s.Save(l, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(LastGoodDir(stateDir), "cable.toml")); err == nil {
		t.Fatal("a copy was saved of a version that was never accepted")
	}

	// Accepted and unchanged: saved, and a new store (a restart) reads it.
	write(file, good)
	if err := s.Save(l, opts); err != nil {
		t.Fatal(err)
	}
	got, ok := NewLastGoodStore(stateDir).Load("cable", file, opts)
	if !ok || got.Policy.Shaper.Download != l.Policy.Shaper.Download || got.File != file {
		t.Fatalf("after a restart: %+v, %v", got, ok)
	}

	// A damaged copy is no fallback.
	write(filepath.Join(LastGoodDir(stateDir), "cable.toml"), "[match\n")
	if _, ok := NewLastGoodStore(stateDir).Load("cable", file, opts); ok {
		t.Fatal("a copy that does not parse was used")
	}

	// Forgetting removes copies of links that are gone, keeps the rest.
	write(filepath.Join(LastGoodDir(stateDir), "hotel.toml"), good)
	s = NewLastGoodStore(stateDir)
	if err := s.ForgetAllBut(map[string]config.Link{"cable": l}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(LastGoodDir(stateDir), "hotel.toml")); err == nil {
		t.Error("the copy of a removed link is still there")
	}
	if _, err := os.Stat(filepath.Join(LastGoodDir(stateDir), "cable.toml")); err != nil {
		t.Error("the copy of a kept link went")
	}
}
