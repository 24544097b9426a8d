// SPDX-License-Identifier: Apache-2.0

// Package debounce turns bursts of signals into one: the daemon's
// policy-directory watch and linkfacts' network watch both wait for a
// burst to settle before they re-read.
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
				select {
				case out <- struct{}{}:
				default: // one pending signal stands for any number
				}
			}
		}
	}()
	return out
}
