// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"reflect"
	"time"

	"github.com/macake/macake/config"
)

// FactsEvent is one state of the network as a FactsWatcher saw it.
type FactsEvent struct {
	// Facts are the current facts; when Err is set they are not to be
	// used (the daemon keeps the last good ones).
	Facts config.Facts
	// Reason says what prompted the event, e.g. "start", "change", "wake".
	Reason string
	// Woke is set when the machine slept since the previous event; Slept
	// is for about how long. Samples from before are stale: re-baseline.
	Woke  bool
	Slept time.Duration
	// Err is set when reading the facts failed.
	Err error
}

// FactsWatcher delivers the network's state: once at start, then on every
// change, after every wake, and when reading starts or stops failing.
type FactsWatcher interface {
	// Watch delivers events until ctx ends, then closes the channel. The
	// channel may hold only the latest event: states in between can be
	// skipped, since every event is handled from scratch.
	Watch(ctx context.Context) <-chan FactsEvent
}

// Defaults of PollFacts.
const (
	DefaultFactsPoll = 2 * time.Second
	// DefaultSleepGap is the unaccounted time between two polls that
	// counts as the machine having slept: the wall clock runs on during
	// sleep, Go's monotonic clock (mach_absolute_time on macOS) does not.
	DefaultSleepGap = 5 * time.Second
)

// PollFacts is a FactsWatcher that reads Source every Interval and reports
// changes, and a sleep when the wall clock ran ahead of the monotonic
// clock by more than SleepGap between two reads.
type PollFacts struct {
	Source   FactsSource
	Interval time.Duration
	SleepGap time.Duration

	// clock reads the wall clock and a monotonic one (tests fake a sleep).
	clock func() (wall time.Time, mono time.Duration)
}

// processStart anchors the monotonic readings of systemClock.
var processStart = time.Now()

// systemClock returns the wall clock (without its monotonic reading) and
// the monotonic time since the process started, which on macOS stops
// while the machine sleeps.
func systemClock() (time.Time, time.Duration) {
	now := time.Now()
	return now.Round(0), now.Sub(processStart)
}

// Watch implements FactsWatcher.
func (p PollFacts) Watch(ctx context.Context) <-chan FactsEvent {
	interval, gap, clock := p.Interval, p.SleepGap, p.clock
	if clock == nil {
		clock = systemClock
	}
	if interval <= 0 {
		interval = DefaultFactsPoll
	}
	if gap <= 0 {
		gap = DefaultSleepGap
	}
	out := make(chan FactsEvent, 1)
	go func() {
		defer close(out)
		var last config.Facts
		var lastErr string
		have := false
		prevWall, prevMono := clock()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			wall, mono := clock()
			slept := wall.Sub(prevWall) - (mono - prevMono)
			prevWall, prevMono = wall, mono
			woke := have && slept >= gap
			facts, err := p.Source.Facts(ctx)
			if ctx.Err() != nil {
				return
			}
			var ev *FactsEvent
			switch {
			case err != nil && (err.Error() != lastErr || woke):
				lastErr = err.Error()
				ev = &FactsEvent{Reason: "error", Err: err, Woke: woke, Slept: max(slept, 0)}
			case err != nil:
			case woke:
				ev = &FactsEvent{Facts: facts, Reason: "wake", Woke: true, Slept: slept}
			case !have:
				ev = &FactsEvent{Facts: facts, Reason: "start"}
			case lastErr != "" || !reflect.DeepEqual(facts, last):
				ev = &FactsEvent{Facts: facts, Reason: "change"}
			}
			if err == nil {
				last, have, lastErr = facts, true, ""
			}
			if ev != nil {
				sendFacts(out, *ev)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// sendFacts puts ev on out, replacing an event nobody has taken yet; a
// wake in the replaced event is carried over, since the samples from
// before the sleep are stale whatever happened since.
func sendFacts(out chan FactsEvent, ev FactsEvent) {
	for {
		select {
		case out <- ev:
			return
		default:
		}
		select {
		case old := <-out:
			if old.Woke && !ev.Woke {
				ev.Woke, ev.Slept = true, old.Slept
			}
		default:
		}
	}
}
