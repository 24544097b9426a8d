// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestWatchPause: a pause takes macake's shaping off (no pipes, no
// controllers; status says until when) and the daemon puts it back by
// itself when the pause runs out, or at once when asked.
func TestWatchPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		ctx := context.Background()
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) {
			t.Fatalf("pipes at start: %v", got)
		}
		if err := r.d.Pause(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		st := r.d.Status()
		if got := r.pipes(); len(got) != 0 || len(r.anchorRules()) != 0 {
			t.Fatalf("while paused: pipes %v, rules %v", got, r.anchorRules())
		}
		if st.Daemon.PausedUntil.IsZero() || len(st.Links) != 0 || len(st.Problems) != 1 || !strings.Contains(st.Problems[0].Message, "shaping is paused until") {
			t.Errorf("status while paused: paused until %v, links %d, problems %q", st.Daemon.PausedUntil, len(st.Links), st.Problems)
		}
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if got := r.pipes(); len(got) != 0 {
			t.Fatalf("pipes back before the pause ran out: %v", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) || r.d.Status().Links[0].Controller == nil {
			t.Fatalf("after the pause ran out: pipes %v\n%s", got, r.log)
		}
		if st := r.d.Status(); !st.Daemon.PausedUntil.IsZero() || len(st.Problems) != 0 {
			t.Errorf("status after the pause: %v %q", st.Daemon.PausedUntil, st.Problems)
		}

		// Asked to resume early, it does at once.
		if err := r.d.Pause(ctx, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := r.d.Pause(ctx, 0); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) {
			t.Errorf("pipes after resuming early: %v", got)
		}
		if err := r.d.Pause(ctx, time.Hour); err == nil || !strings.Contains(err.Error(), "longer than") {
			t.Errorf("an hour's pause: %v", err)
		}
		for _, want := range []string{"shaping paused on request", "shaping resumed on request", "the pause ran out; shaping resumed"} {
			if !strings.Contains(r.log.String(), want) {
				t.Errorf("the log lacks %q", want)
			}
		}
	})
}
