// SPDX-License-Identifier: Apache-2.0

package pauses

import (
	"testing"
	"time"

	"github.com/macake/macake/state"
)

// TestLeasesOf: a link is held by its own pause or every link's, whichever
// ends later, and by neither once they ran out; Expire forgets those that
// ran out and NextEnd is the first end left.
func TestLeasesOf(t *testing.T) {
	now := time.Unix(10_000, 0)
	own := state.Pause{Since: now.Add(-time.Minute), Until: now.Add(10 * time.Minute), By: "cli"}
	all := state.Pause{Since: now.Add(-time.Minute), Until: now.Add(20 * time.Minute), By: "mqtt"}
	ended := state.Pause{Since: now.Add(-time.Hour), Until: now.Add(-time.Second)}
	for _, tc := range []struct {
		name   string
		leases Leases
		link   string
		want   state.Pause
		held   bool
	}{
		{"its own pause", Leases{"home": own}, "home", own, true},
		{"another link's pause", Leases{"work": own}, "home", state.Pause{}, false},
		{"every link's, ending later", Leases{"home": own, state.AllLinks: all}, "home", all, true},
		{"its own, ending later", Leases{"home": all, state.AllLinks: own}, "home", all, true},
		{"a pause that ran out", Leases{"home": ended}, "home", state.Pause{}, false},
	} {
		if got, held := tc.leases.Of(tc.link, now); got != tc.want || held != tc.held {
			t.Errorf("%s: Of = %+v, %v; want %+v, %v", tc.name, got, held, tc.want, tc.held)
		}
	}
	l := Leases{"home": ended, "work": own, state.AllLinks: all}
	if gone := l.Expire(now); len(gone) != 1 || gone["home"] != ended || len(l) != 2 {
		t.Errorf("Expire took %v and left %v; want only home's", gone, l)
	}
	if next := l.NextEnd(); !next.Equal(own.Until) {
		t.Errorf("NextEnd = %v, want %v", next, own.Until)
	}
}

// TestLimiter: Burst requests at once, then one a Refill.
func TestLimiter(t *testing.T) {
	now := time.Unix(10_000, 0)
	var l Limiter
	for i := range Burst {
		if _, ok := l.Take(now); !ok {
			t.Fatalf("request %d of a burst refused", i+1)
		}
	}
	if wait, ok := l.Take(now); ok || wait != Refill {
		t.Errorf("beyond the burst: ok %v, wait %v; want refused, %v", ok, wait, Refill)
	}
	if _, ok := l.Take(now.Add(Refill)); !ok {
		t.Errorf("refused a Refill later")
	}
}
