// SPDX-License-Identifier: Apache-2.0

// Package debounce turns bursts of signals into one: the daemon's
// policy-directory watch and linkfacts' network watch both wait for a
// burst to settle before they re-read. Signal is the one way their
// watchers (and the MQTT publisher) send such a signal.
package debounce

import (
	"context"
	"time"
)

// Bursts turns bursts of signals on in into one signal on the returned
// channel: quiet after the burst's last signal, but no later than ceiling
// after its first. The channel is closed when ctx ends or in is closed.
func Bursts(ctx context.Context, in <-chan struct{}, quiet, ceiling time.Duration) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		var first time.Time // first signal of the current burst; zero when idle
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case _, ok := <-in:
				if !ok {
					timer.Stop()
					return
				}
				now := time.Now()
				if first.IsZero() {
					first = now
				}
				timer.Reset(max(0, min(quiet, first.Add(ceiling).Sub(now))))
			case <-timer.C:
				first = time.Time{}
				Signal(out)
			}
		}
	}()
	return out
}

// Signal wakes whoever waits on c without blocking: when a signal is
// already pending, it stands for this one too (c has a buffer of one).
func Signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
