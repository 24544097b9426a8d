// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"context"
	"time"

	"github.com/macake/macake/internal/debounce"
)

// Defaults for [WatchConfig].
const (
	DefaultPoll     = 10 * time.Second
	DefaultDebounce = 500 * time.Millisecond
	// DefaultSleepThreshold: a gap of this much unaccounted time between
	// two checks means the machine slept. macOS DarkWake maintenance
	// wakes are shorter than a minute; they count too, since counters and
	// baselines are stale after any suspension.
	DefaultSleepThreshold = 5 * time.Second
)

// WatchConfig tunes [Watch]. Zero fields take their defaults.
type WatchConfig struct {
	// Poll re-reads the facts this often even without events (events can
	// be lost when a socket buffer overflows). Default 10 s.
	Poll time.Duration
	// Debounce waits for this much quiet after an event before reading
	// (bursts of route messages accompany every change), but never more
	// than 4 × Debounce after the first event. Default 500 ms.
	Debounce time.Duration
	// SleepThreshold is the suspended time that counts as a sleep.
	SleepThreshold time.Duration

	// suspended returns the time the machine has spent suspended since
	// some fixed point, and whether the OS tells (tests replace it).
	suspended func() (time.Duration, bool)
}

// Event is one state of the network, delivered by Watch.
type Event struct {
	// Facts are the current facts (the last good ones when Err is set).
	Facts Facts
	// Reason says what prompted the event: "start", "change", "poll",
	// "wake" or "error".
	Reason string
	// Woke is set when the machine slept since the previous check; Slept
	// is for how long (about). Re-baseline counters and latency.
	Woke  bool
	Slept time.Duration
	// Err is set when reading the facts failed.
	Err error
}

// Watch reads src now and then whenever it may have changed, and sends an
// Event on the returned channel for the initial state, for every change,
// after every wake and when reading starts or stops failing. The channel
// holds only the latest event: a slow consumer skips intermediate states
// (reconciliation is level-triggered) and never blocks the watcher. It is
// closed when ctx ends.
func Watch(ctx context.Context, src Source, cfg WatchConfig) <-chan Event {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.SleepThreshold <= 0 {
		cfg.SleepThreshold = DefaultSleepThreshold
	}
	if cfg.suspended == nil {
		cfg.suspended = suspendedTime
	}
	out := make(chan Event, 1)
	var changes <-chan struct{}
	if n, ok := src.(Notifier); ok {
		if ch, err := n.Changes(ctx); err == nil {
			changes = ch
		}
		// Without events, polling alone still finds every change.
	}
	go watchLoop(ctx, src, cfg, changes, out)
	return out
}

// send replaces any undelivered event with ev. A wake in the replaced
// event is carried over: the samples from before the sleep are stale
// whatever happened since, and a consumer that missed the wake would
// trust them.
func send(out chan Event, ev Event) {
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

// clockMark is a point on the wall clock, the monotonic clock, and the
// suspended-time counter.
type clockMark struct {
	at        time.Time // with monotonic reading
	suspended time.Duration
	haveSusp  bool
}

func mark(cfg WatchConfig) clockMark {
	s, ok := cfg.suspended()
	return clockMark{at: time.Now(), suspended: s, haveSusp: ok}
}

// slept estimates the time suspended between two marks: from the OS's
// suspended-time counter when it has one (Linux CLOCK_BOOTTIME minus
// CLOCK_MONOTONIC), else from the wall clock running ahead of the
// monotonic clock, which stops during sleep (macOS mach_absolute_time).
func slept(a, b clockMark) time.Duration {
	if a.haveSusp && b.haveSusp {
		return b.suspended - a.suspended
	}
	wall := b.at.Round(0).Sub(a.at.Round(0))
	mono := b.at.Sub(a.at)
	return wall - mono
}

func watchLoop(ctx context.Context, src Source, cfg WatchConfig, changes <-chan struct{}, out chan Event) {
	defer close(out)
	var last Facts
	var lastErr string
	have := false
	prev := mark(cfg)

	check := func(reason string) {
		now := mark(cfg)
		s := slept(prev, now)
		prev = now
		woke := s >= cfg.SleepThreshold
		facts, err := src.Facts(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			if err.Error() != lastErr || woke {
				lastErr = err.Error()
				send(out, Event{Facts: last, Reason: "error", Err: err, Woke: woke, Slept: max(s, 0)})
			}
			return
		case woke:
			reason = "wake"
		case have && lastErr == "" && Equal(facts, last):
			return
		}
		if !have {
			reason = "start"
		}
		last, have, lastErr = facts, true, ""
		ev := Event{Facts: facts, Reason: reason, Woke: woke}
		if woke {
			ev.Slept = s
		}
		send(out, ev)
	}

	check("start")
	poll := time.NewTicker(cfg.Poll)
	defer poll.Stop()
	settled := debounce.Bursts(ctx, changes, cfg.Debounce, 4*cfg.Debounce)
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			check("poll")
		case _, ok := <-settled:
			if !ok {
				settled = nil
				continue
			}
			check("change")
		}
	}
}
