// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"sync"
)

// A live reading shared by the reads of one pass. A pass asks which slots
// the live system uses, then plans against it, and a backend's reading of
// the live state is several processes (pfctl and dnctl, or tc and ip):
// with WithLiveReading, the pass's reads share one reading until a change
// is carried out (ForgetLiveReading), and the check after an apply reads
// afresh. Other contexts (the status server, the controllers) never see
// it.

type liveReadingKey struct{}

type liveReading struct {
	mu   sync.Mutex
	live any
	ok   bool
}

// WithLiveReading returns ctx with room for one reading of the live state,
// which ReadLive fills on first use and returns after.
func WithLiveReading(ctx context.Context) context.Context {
	return context.WithValue(ctx, liveReadingKey{}, &liveReading{})
}

// ReadLive returns read(ctx), or, when ctx carries a live reading
// (WithLiveReading), the reading taken by an earlier ReadLive with it. A
// failed read is not kept.
func ReadLive[T any](ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	r, _ := ctx.Value(liveReadingKey{}).(*liveReading)
	if r == nil {
		return read(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.live.(T); r.ok && ok {
		return v, nil
	}
	v, err := read(ctx)
	if err == nil {
		r.live, r.ok = v, true
	}
	return v, err
}

// ForgetLiveReading drops ctx's live reading, if it carries one: the live
// state changed (an op was carried out), and the next read must see it.
func ForgetLiveReading(ctx context.Context) {
	if r, _ := ctx.Value(liveReadingKey{}).(*liveReading); r != nil {
		r.mu.Lock()
		r.live, r.ok = nil, false
		r.mu.Unlock()
	}
}
