// SPDX-License-Identifier: Apache-2.0

// Package history keeps the last ten minutes of every active link, one
// sample a second (Links), for status and the status page's charts.
package history

import (
	"sync"
	"time"

	"github.com/macake/macake/daemon/statusapi"
)

// What status and the status page show of the past: one sample a second
// for ten minutes, per active link (about 60 KB each).
const (
	// Step is the time between a link's samples.
	Step = time.Second
	// Window is how far back the samples go.
	Window     = 10 * time.Minute
	historyLen = int(Window / Step)
)

// Links are the active links' recent samples. The daemon's recorder
// goroutine adds to them; status requests read them. The zero Links is
// ready to use; it is safe for concurrent use.
type Links struct {
	mu    sync.Mutex
	links map[string]*historyRing
}

// historyRing is one link's samples, a ring of the last Window.
type historyRing struct {
	samples [historyLen]statusapi.HistorySample
	next, n int
}

// Add appends one sample per link in samples and forgets the links that
// have had none for a whole window.
func (h *Links) Add(now time.Time, samples map[string]statusapi.HistorySample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.links == nil {
		h.links = map[string]*historyRing{}
	}
	for name, s := range samples {
		r := h.links[name]
		if r == nil {
			r = &historyRing{}
			h.links[name] = r
		}
		r.samples[r.next] = s
		r.next = (r.next + 1) % historyLen
		r.n = min(r.n+1, historyLen)
	}
	for name, r := range h.links {
		if last := r.samples[(r.next+historyLen-1)%historyLen]; now.Sub(last.At) > Window {
			delete(h.links, name)
		}
	}
}

// Get returns a link's samples after since (all for the zero time),
// oldest first.
func (h *Links) Get(link string, since time.Time) []statusapi.HistorySample {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.links[link]
	if r == nil {
		return nil
	}
	out := make([]statusapi.HistorySample, 0, r.n)
	for i := range r.n {
		s := r.samples[(r.next-r.n+i+historyLen)%historyLen]
		if s.At.After(since) {
			out = append(out, s)
		}
	}
	return out
}
