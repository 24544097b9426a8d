// SPDX-License-Identifier: Apache-2.0

package sensors

import (
	"context"

	"github.com/macake/macake/sense/linkfacts"
)

// FactsEvent is one state of the network as a FactsWatcher saw it: the
// sensing code's linkfacts.Event (facts, reason, wake and sleep time,
// error), so that LinkFacts hands linkfacts.Watch's channel over as it is.
// When Err is set the daemon keeps its last good facts.
type FactsEvent = linkfacts.Event

// FactsWatcher delivers the network's state: once at start, then on every
// change, after every wake, and when reading starts or stops failing.
type FactsWatcher interface {
	// Watch delivers events until ctx ends, then closes the channel. The
	// channel may hold only the latest event: states in between can be
	// skipped, since every event is handled from scratch.
	Watch(ctx context.Context) <-chan FactsEvent
}

// LinkFacts is the FactsWatcher of the sensing code: linkfacts.Watch on a
// source (the routing socket or netlink, or the MACAKE_LINK_FACTS file,
// whose rewrites count as network changes), with its sleep detection.
type LinkFacts struct {
	// Source is where the facts are read.
	Source linkfacts.Source
	// Config is how they are watched (poll, debounce, sleep detection).
	Config linkfacts.WatchConfig
}

// Watch implements FactsWatcher. linkfacts.Watch's channel already holds
// only the latest event and carries a replaced event's wake over.
func (l LinkFacts) Watch(ctx context.Context) <-chan FactsEvent {
	return linkfacts.Watch(ctx, l.Source, l.Config)
}
