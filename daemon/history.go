// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/shape"
)

// What status and the status page show of the past: one sample a second
// for ten minutes, per active link (about 60 KB each).
const (
	historyStep   = time.Second
	historyWindow = 10 * time.Minute
	historyLen    = int(historyWindow / historyStep)
)

// histories are the active links' recent samples. The recorder goroutine
// adds to them; status requests read them.
type histories struct {
	mu    sync.Mutex
	links map[string]*historyRing
}

type historyRing struct {
	samples [historyLen]statusapi.HistorySample
	next, n int
}

// add appends one sample per link in samples and forgets the links that
// have had none for a whole window.
func (h *histories) add(now time.Time, samples map[string]statusapi.HistorySample) {
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
		if last := r.samples[(r.next+historyLen-1)%historyLen]; now.Sub(last.At) > historyWindow {
			delete(h.links, name)
		}
	}
}

// get returns a link's samples after since (all for the zero time),
// oldest first.
func (h *histories) get(link string, since time.Time) []statusapi.HistorySample {
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

// recordHistory samples every active link once a step until ctx ends. It
// reads what Status reads (the published view, the controllers'
// snapshots) and runs nothing. Its steps are on the daemon's grid, where
// they fire with a counter read of every link instead of on their own.
func (d *Daemon) recordHistory(ctx context.Context) {
	t := time.NewTimer(time.Until(d.grid.Next(time.Now(), historyStep)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := time.Now()
			d.hist.add(now, d.historySamples(now))
			t.Reset(time.Until(d.grid.Next(now, historyStep)))
		}
	}
}

// historySamples is one sample of every active link now.
func (d *Daemon) historySamples(now time.Time) map[string]statusapi.HistorySample {
	p := d.pub.Load()
	var live shape.State
	if l := d.pubLive.Load(); l != nil {
		live = *l
	}
	out := make(map[string]statusapi.HistorySample, len(p.links))
	for _, pl := range p.links {
		name := pl.active.Policy.Name
		s := statusapi.HistorySample{At: now, AchievedDown: statusapi.Missing, AchievedUp: statusapi.Missing,
			Baseline: statusapi.Missing, RTT: statusapi.Missing, DelayDown: statusapi.Missing, DelayUp: statusapi.Missing}
		if l, ok := live.Link(name); ok {
			s.ShaperDown, s.ShaperUp = statusapi.Value(l.Download.RateBits), statusapi.Value(l.Upload.RateBits)
		}
		if r := pl.runner; r != nil {
			st := r.state(now)
			d.bounds.Add(now, name, st)
			if r.counters != nil {
				s.AchievedDown, s.AchievedUp = statusapi.Value(st.Download.Achieved), statusapi.Value(st.Upload.Achieved)
			}
			// Before the first reply there is no idle RTT, and the
			// baselines are the controller's starting values.
			if st.IdleRTT > 0 && st.Counters.Responses > 0 {
				sec := func(d time.Duration) statusapi.Value { return statusapi.Value(statusapi.Seconds(d)) }
				s.Baseline = sec(st.IdleRTT)
				// The bufferbloat window's mean, which the controller
				// steers by: the reflectors' delta EWMAs pause under load.
				s.RTT = sec(st.IdleRTT + st.Download.WindowAverage + st.Upload.WindowAverage)
				s.DelayDown, s.DelayUp = sec(st.Download.WindowAverage), sec(st.Upload.WindowAverage)
			}
		}
		out[name] = s
	}
	return out
}
