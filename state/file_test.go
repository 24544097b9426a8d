// SPDX-License-Identifier: Apache-2.0

package state

import (
	"slices"
	"testing"
	"time"

	"github.com/macake/macake/backend"
)

// TestEnableIntentSurvivesACrash: the intent recorded before `pfctl -E`
// is on disk when SetEnableIntent returns (the next process reads it),
// and saving the token forgets it in the same write.
func TestEnableIntentSurvivesACrash(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	tok := &File{Dir: dir, State: &State{Version: FormatVersion}}
	if err := tok.SetEnableIntent(&backend.EnableIntent{At: at, Before: []string{"17", "42"}}); err != nil {
		t.Fatal(err)
	}
	// The next process.
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	next := &File{Dir: dir, State: s}
	in, pending := next.EnableIntent()
	if !pending || !in.At.Equal(at) || !slices.Equal(in.Before, []string{"17", "42"}) {
		t.Fatalf("after a restart the intent reads %+v (pending %v)", in, pending)
	}
	if err := next.SetPFToken("99"); err != nil {
		t.Fatal(err)
	}
	s, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.PFToken != "99" || s.PFEnablePending != nil {
		t.Errorf("after saving the token the file holds token %q, pending %+v", s.PFToken, s.PFEnablePending)
	}
}

// TestInMemoryFileNeverWrites: what a read-only run's backend records
// stays in memory, and the state it was made from is not changed.
func TestInMemoryFileNeverWrites(t *testing.T) {
	dir := t.TempDir()
	orig := &State{Version: FormatVersion, Slots: map[string]int{"home": 1}, TCOwnedRoots: []string{"eth0"}}
	if err := Save(dir, orig); err != nil {
		t.Fatal(err)
	}
	f := InMemory(orig)
	if err := f.SetRootOwned("eth1", true); err != nil {
		t.Fatal(err)
	}
	if err := f.Update(func(s *State) { s.Slots["away"] = 2 }); err != nil {
		t.Fatal(err)
	}
	if !f.OwnedRoots()["eth1"] || f.Slots()["away"] != 2 {
		t.Errorf("the in-memory file forgot what it recorded: roots %v slots %v", f.OwnedRoots(), f.Slots())
	}
	if len(orig.TCOwnedRoots) != 1 || len(orig.Slots) != 1 {
		t.Errorf("recording changed the state it was made from: %+v", orig)
	}
	onDisk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk.TCOwnedRoots) != 1 || len(onDisk.Slots) != 1 {
		t.Errorf("an in-memory file wrote the state file: %+v", onDisk)
	}
}
