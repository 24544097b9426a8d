// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"slices"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/state"
)

// TestEnableIntentSurvivesACrash: the intent recorded before `pfctl -E`
// is on disk when SetEnableIntent returns (the next process reads it),
// and saving the token forgets it in the same write.
func TestEnableIntentSurvivesACrash(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	tok := &StateTokens{Dir: dir, State: &state.State{Version: state.FormatVersion}}
	if err := tok.SetEnableIntent(&pfdn.EnableIntent{At: at, Before: []string{"17", "42"}}); err != nil {
		t.Fatal(err)
	}
	// The next process.
	s, err := state.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	next := &StateTokens{Dir: dir, State: s}
	in, pending := next.EnableIntent()
	if !pending || !in.At.Equal(at) || !slices.Equal(in.Before, []string{"17", "42"}) {
		t.Fatalf("after a restart the intent reads %+v (pending %v)", in, pending)
	}
	if err := next.SetPFToken("99"); err != nil {
		t.Fatal(err)
	}
	s, err = state.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.PFToken != "99" || s.PFEnablePending != nil {
		t.Errorf("after saving the token the file holds token %q, pending %+v", s.PFToken, s.PFEnablePending)
	}
}
