// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"

	"github.com/macake/macake/sense/linkfacts"
)

// LinkFacts is the FactsWatcher of the sensing code: linkfacts.Watch on a
// source (the routing socket or netlink, or the MACAKE_LINK_FACTS file,
// whose rewrites count as network changes), with its sleep detection.
type LinkFacts struct {
	Source linkfacts.Source
	Config linkfacts.WatchConfig
}

// Watch implements FactsWatcher. linkfacts.Watch's channel already holds
// only the latest event and carries a replaced event's wake over.
func (l LinkFacts) Watch(ctx context.Context) <-chan FactsEvent {
	return linkfacts.Watch(ctx, l.Source, l.Config)
}
