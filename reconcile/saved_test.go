// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/state"
)

// TestNewSavedPlanRefusesWhatCannotBeCheckedLater: a saved plan is only
// worth applying if applying it can tell whether the live state moved, so
// an outcome made without reading it, one that stopped early and one of a
// pass that took no fingerprint (only plan-only passes take one) are
// refused, each saying why.
func TestNewSavedPlanRefusesWhatCannotBeCheckedLater(t *testing.T) {
	in := PassInput{Run: Run{Store: &state.File{State: &state.State{}}}}
	for _, tc := range []struct {
		name string
		o    Outcome
		want string // "" = saved
	}{
		{"complete", Outcome{Step: StepDone, Live: "abc"}, ""},
		{"blind", Outcome{Step: StepDone, Blind: true}, "run it with sudo"},
		{"stopped", Outcome{Step: StepBlocked, Live: "abc"}, "stopped at blocked"},
		{"no fingerprint", Outcome{Step: StepDone}, "no fingerprint of the live state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := NewSavedPlan(&tc.o, in, "tc", "/etc/macake/links.d", nil, time.Unix(0, 0))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && sp.From.Live != tc.o.Live:
				t.Errorf("saved live fingerprint %q, want %q", sp.From.Live, tc.o.Live)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
