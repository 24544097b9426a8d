// SPDX-License-Identifier: Apache-2.0

// Package tickgrid puts periodic timers on one grid, so that timers of
// different periods fire at the same instants where their periods meet.
// macake watch's cost is its wake-ups, not its work: the counter reads
// (200 ms), the prober's sends (every 100 ms with 6 reflectors at the
// default 300 ms), the controller's tick and the history (1 s) of every
// link, each on a ticker of its own started at its own moment, woke the
// process at up to four different instants where one would do. On one grid
// the 1 s timers fire with a counter read, and with the default probing
// every counter read fires with a send. The Go runtime runs every
// timer that is due when it wakes, so timers due at the same instant cost
// one wake-up.
package tickgrid

import "time"

// Grid is the instants epoch + k·period, for every period.
type Grid struct{ epoch time.Time }

// New returns the grid whose instants are measured from epoch (keep its
// monotonic clock reading: time.Now()).
func New(epoch time.Time) Grid { return Grid{epoch: epoch} }

// Next returns the first instant of period's grid strictly after now. A
// zero Grid has no epoch: it returns now + period, a plain ticker.
func (g Grid) Next(now time.Time, period time.Duration) time.Time {
	if g.epoch.IsZero() || period <= 0 {
		return now.Add(period)
	}
	since := now.Sub(g.epoch)
	if since < 0 {
		return g.epoch
	}
	return g.epoch.Add((since/period + 1) * period)
}
