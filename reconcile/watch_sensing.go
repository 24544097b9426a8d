// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"

	"github.com/macake/macake/reconcile/linkfacts"
)

// LinkFacts is the FactsWatcher of the sensing code: linkfacts.Watch on a
// source (the routing socket or netlink, or the MACAKE_LINK_FACTS file,
// whose rewrites count as network changes), with its sleep detection.
type LinkFacts struct {
	Source linkfacts.Source
	Config linkfacts.WatchConfig
}

// Watch implements FactsWatcher.
func (l LinkFacts) Watch(ctx context.Context) <-chan FactsEvent {
	out := make(chan FactsEvent, 1)
	in := linkfacts.Watch(ctx, l.Source, l.Config)
	go func() {
		defer close(out)
		for ev := range in {
			sendFacts(out, FactsEvent{Facts: ev.Facts, Reason: ev.Reason, Woke: ev.Woke, Slept: ev.Slept, Err: ev.Err})
		}
	}()
	return out
}
