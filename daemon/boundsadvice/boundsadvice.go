// SPDX-License-Identifier: Apache-2.0

// Package boundsadvice tells when a link's bounds are wrong: from a second-by-
// second count of each steered direction's last hour (Tracker), it advises
// raising a max the link sits at, or lowering a min it is cut to, with the
// edit to make. Status, doctor and the status page show the advice; nothing
// changes a file.
package boundsadvice

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// When a steered direction spends most of its loaded time pinned at its
// max, the link could carry more than the policy lets it; when it spends
// it cut to its min, the min is above what the link carries without a
// queue.
const (
	// Window is how far back the daemon looks.
	Window = time.Hour
	// Share is the share of a direction's loaded time at a bound
	// above which it advises.
	Share = 0.5
	// MinLoaded is the least loaded time in the window before it
	// advises: a short transfer proves little.
	MinLoaded = time.Minute
	// windowBuckets cut the window into minutes, so an hour of counts
	// costs sixty small records per direction.
	windowBuckets = int(Window / time.Minute)
)

// boundsCounts are one minute of a direction's time: loaded seconds, and
// those at max and at min (with what the link carried then).
type boundsCounts struct {
	minute               int64 // Unix minute this bucket counts
	loaded, atMax, atMin int
	achievedAtMin        float64
}

// boundsWindow is a direction's last hour, for the bounds in force: a new
// min or max (the policy was edited) starts it afresh.
type boundsWindow struct {
	min, max int64
	buckets  [windowBuckets]boundsCounts
	first    time.Time
}

// Tracker keeps every active link's windows. The daemon's history
// recorder adds a sample a second; status requests read it. The zero
// Tracker is ready to use; it is safe for concurrent use.
type Tracker struct {
	mu    sync.Mutex
	links map[string]*[2]boundsWindow
	seen  map[string]time.Time
}

// Add counts one second of link's controller state s (steered
// directions only, while its decisions reach the shaper).
func (b *Tracker) Add(now time.Time, link string, s controller.State) {
	if !s.Shaping {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.links == nil {
		b.links, b.seen = map[string]*[2]boundsWindow{}, map[string]time.Time{}
	}
	w := b.links[link]
	if w == nil {
		w = &[2]boundsWindow{}
		b.links[link] = w
	}
	b.seen[link] = now
	minute := now.Unix() / 60
	for _, dir := range shape.Directions {
		ds, win := s.Direction(dir), &w[dir]
		if ds.MonitorOnly {
			continue
		}
		if win.min != ds.Min || win.max != ds.Max || win.first.IsZero() {
			*win = boundsWindow{min: ds.Min, max: ds.Max, first: now}
		}
		c := &win.buckets[minute%int64(windowBuckets)]
		if c.minute != minute {
			*c = boundsCounts{minute: minute}
		}
		if ds.Load == controller.LoadIdle {
			continue
		}
		c.loaded++
		switch {
		case ds.Rate >= ds.Max:
			c.atMax++
		case ds.Rate <= ds.Min:
			c.atMin++
			c.achievedAtMin += float64(ds.Achieved)
		}
	}
	for name, at := range b.seen {
		if now.Sub(at) > Window {
			delete(b.links, name)
			delete(b.seen, name)
		}
	}
}

// totals sums a direction's window as of now.
func (w *boundsWindow) totals(now time.Time) (c boundsCounts, span time.Duration) {
	oldest := now.Unix()/60 - int64(windowBuckets) + 1
	for _, b := range w.buckets {
		if b.minute >= oldest {
			c.loaded += b.loaded
			c.atMax += b.atMax
			c.atMin += b.atMin
			c.achievedAtMin += b.achievedAtMin
		}
	}
	return c, min(now.Sub(w.first), Window)
}

// Advice is what the windows of link advise at now, for the policy l in
// force on the network of profile p, whose backend shapes at most lim.
func (b *Tracker) Advice(now time.Time, l config.Link, p state.Profile, lim shape.Limits) []statusapi.Advice {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.links[l.Name]
	if w == nil {
		return nil
	}
	var out []statusapi.Advice
	for _, dir := range []shape.Direction{shape.Download, shape.Upload} {
		win := &w[dir]
		if win.first.IsZero() || !l.Shaper.Steers(dir) {
			continue
		}
		c, span := win.totals(now)
		if time.Duration(c.loaded)*time.Second < MinLoaded {
			continue
		}
		a := statusapi.Advice{Direction: dir.String(), LoadedSeconds: float64(c.loaded), WindowSeconds: span.Round(time.Second).Seconds(), File: l.File}
		lo, hi := win.min, win.max
		switch {
		case float64(c.atMax) > Share*float64(c.loaded):
			a.Bound, a.Share, a.CurrentBits = "max", float64(c.atMax)/float64(c.loaded), hi
			a.SuggestedBits = raisedMax(hi, p, dir, lim)
			if a.SuggestedBits <= hi {
				continue // at the backend's highest rate already
			}
			hi = a.SuggestedBits
		case float64(c.atMin) > Share*float64(c.loaded):
			a.Bound, a.Share, a.CurrentBits = "min", float64(c.atMin)/float64(c.loaded), lo
			a.SuggestedBits = loweredMin(lo, c.achievedAtMin/float64(c.atMin))
			if a.SuggestedBits >= lo {
				continue
			}
			lo = a.SuggestedBits
		default:
			continue
		}
		verb := "raise max"
		what := "sat at max"
		if a.Bound == "min" {
			verb, what = "lower min", "was cut to min"
		}
		a.Message = fmt.Sprintf("%s %s %.0f%% of its loaded time in the last %s (%s loaded): %s from %s to ~%s",
			dir, what, 100*a.Share, windowText(span), loadedText(c.loaded), verb,
			shape.FormatApprox(float64(a.CurrentBits)), shape.FormatApprox(float64(a.SuggestedBits)))
		a.Edit = fmt.Sprintf("[autorate] %s = { min = %q, max = %q }", dir, units.Rate(lo).String(), units.Rate(hi).String())
		out = append(out, a)
	}
	return out
}

// raisedMax is the max to suggest for a direction pinned at max: the
// highest capacity measured on the network when that is above it, else
// 40 % more (the link carries more, but how much more only a measurement
// says), rounded to two figures, at most what the backend shapes.
func raisedMax(max int64, p state.Profile, dir shape.Direction, lim shape.Limits) int64 {
	_, peak, _ := p.Capacity(dir)
	next := max * 14 / 10
	if peak > max*21/20 {
		next = peak
	}
	return min(twoFigures(next, math.Ceil), lim.Rate())
}

// loweredMin is the min to suggest for a direction cut to min: below what
// the link carried while it sat there (it queued at that rate), and at
// least a quarter lower, rounded down to two figures.
func loweredMin(min int64, achieved float64) int64 {
	next := math.Min(0.9*achieved, 0.75*float64(min))
	return max(twoFigures(int64(next), math.Floor), int64(units.MinRate))
}

// twoFigures rounds bits to two significant figures with round (up or
// down): 55 Mbit/s, 140 Mbit/s, 1.4 Gbit/s.
func twoFigures(bits int64, round func(float64) float64) int64 {
	if bits < 100 {
		return bits
	}
	unit := math.Pow(10, math.Floor(math.Log10(float64(bits)))-1)
	return int64(round(float64(bits)/unit) * unit)
}

// loadedText is how long a direction was loaded: "75 s", "38 min".
func loadedText(seconds int) string {
	if seconds < 120 {
		return fmt.Sprintf("%d s", seconds)
	}
	return fmt.Sprintf("%d min", seconds/60)
}

// windowText is a span for the advice: "hour", "42 minutes".
func windowText(d time.Duration) string {
	switch m := int(d.Round(time.Minute) / time.Minute); {
	case d >= Window-30*time.Second:
		return "hour"
	case m >= 2:
		return fmt.Sprintf("%d minutes", m)
	}
	return fmt.Sprintf("%d seconds", int(d.Round(time.Second)/time.Second))
}
