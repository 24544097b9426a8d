// SPDX-License-Identifier: Apache-2.0

// Package idlertt is a link's idle round-trip filter: from the round trips
// of its prober's replies alone, a low percentile of the least of each
// bucket over the last ten minutes (Filter). It is what `queue = "auto"`
// is sized from on a network nobody measured, and what status shows as
// the idle round trip.
package idlertt

import (
	"slices"
	"sync"
	"time"
)

// The filter's shape.
const (
	// idleRTTBucket is the span of one bucket of the filter: each keeps
	// the least round trip of the replies that came in it.
	idleRTTBucket = 10 * time.Second
	// idleRTTBuckets is how many buckets the filter keeps: ten minutes, so
	// that a download of several minutes, whose replies all carry some
	// queue, does not pass for the idle path.
	idleRTTBuckets = 60
	// idleRTTPercentile is the share of the buckets' minima below the
	// figure: a low percentile rather than the least, so that one odd
	// bucket does not set the queue of the next hour.
	idleRTTPercentile = 0.1
	// Min stands for an idle RTT measured as 0 (below the clock's
	// resolution): "measured, and short", where 0 in the state file means
	// "not measured".
	Min = 100 * time.Microsecond
)

// Filter is a link's idle RTT filter: the round trips of its prober's
// replies and nothing else. A lost or timed-out probe never becomes a
// sample, and a reflector that has not answered yet has no figure at all,
// so the controller's starting baseline (100 ms each way) of a slot whose
// reflector never answered cannot pass for the path's (issue 27: with 24
// of 30 reflectors silent, watch learnt 200 ms). The figure is a low
// percentile (idleRTTPercentile) of the least round trip of every
// idleRTTBucket over the last idleRTTBuckets.
//
// The runner's goroutine adds replies, the owner reads; a reply costs a
// lock and a comparison, no allocation.
type Filter struct {
	mu    sync.Mutex
	start time.Time
	// least[i] is the least round trip of bucket number at[i]; at[i] < 0
	// marks an empty bucket.
	least [idleRTTBuckets]time.Duration
	at    [idleRTTBuckets]int64
	// replies counts every reply added.
	replies int
}

// New returns an empty filter whose buckets count from start.
func New(start time.Time) *Filter {
	f := &Filter{start: start}
	for i := range f.at {
		f.at[i] = -1
	}
	return f
}

// Add records the round trip of a reply received at when.
func (f *Filter) Add(when time.Time, rtt time.Duration) {
	if rtt <= 0 {
		// Below the clock's resolution: no information about the queue,
		// and 0 would read as "not measured".
		rtt = Min
	}
	n := max(int64(when.Sub(f.start)/idleRTTBucket), 0)
	i := n % idleRTTBuckets
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies++
	if f.at[i] != n {
		f.at[i], f.least[i] = n, rtt
		return
	}
	f.least[i] = min(f.least[i], rtt)
}

// Idle returns the filter's idle RTT at now, and how many replies the
// filter has seen in all; 0 before any reply in the window.
func (f *Filter) Idle(now time.Time) (time.Duration, int) {
	cur := int64(now.Sub(f.start) / idleRTTBucket)
	var buf [idleRTTBuckets]time.Duration
	f.mu.Lock()
	minima := buf[:0]
	for i, n := range f.at {
		if n >= 0 && n > cur-idleRTTBuckets && n <= cur {
			minima = append(minima, f.least[i])
		}
	}
	replies := f.replies
	f.mu.Unlock()
	if len(minima) == 0 {
		return 0, replies
	}
	slices.Sort(minima)
	return minima[int(idleRTTPercentile*float64(len(minima)-1))], replies
}
