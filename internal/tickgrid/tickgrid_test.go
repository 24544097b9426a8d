// SPDX-License-Identifier: Apache-2.0

package tickgrid

import (
	"testing"
	"time"
)

func TestNextIsOnTheGridAndAfterNow(t *testing.T) {
	epoch := time.Now()
	g := New(epoch)
	ms := time.Millisecond
	for _, c := range []struct {
		now, period, want time.Duration
	}{
		{0, 200 * ms, 200 * ms},
		{1 * ms, 200 * ms, 200 * ms},
		{200 * ms, 200 * ms, 400 * ms},
		{599 * ms, 300 * ms, 600 * ms},
		{601 * ms, time.Second, time.Second},
		{-5 * ms, 200 * ms, 0},
	} {
		if got := g.Next(epoch.Add(c.now), c.period).Sub(epoch); got != c.want {
			t.Errorf("Next(epoch%+v, %v) = epoch+%v, want epoch+%v", c.now, c.period, got, c.want)
		}
	}
	// Periods meet: a 300 ms and a 200 ms timer share every 600 ms.
	if a, b := g.Next(epoch.Add(450*ms), 300*ms), g.Next(epoch.Add(500*ms), 200*ms); !a.Equal(b) {
		t.Errorf("300 ms and 200 ms grids do not meet at 600 ms: %v, %v", a.Sub(epoch), b.Sub(epoch))
	}
	if got := (Grid{}).Next(epoch, 300*ms); got.Sub(epoch) != 300*ms {
		t.Errorf("a zero Grid is not a plain ticker: %v", got.Sub(epoch))
	}
}
