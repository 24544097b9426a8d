// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
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
