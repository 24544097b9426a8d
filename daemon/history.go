// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"time"

	"github.com/macake/macake/daemon/history"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/shape"
)

// recordHistory samples every active link once a step until ctx ends. It
// reads what Status reads (the published view, the controllers'
// snapshots) and runs nothing. Its steps are on the daemon's grid, where
// they fire with a counter read of every link instead of on their own.
func (d *Daemon) recordHistory(ctx context.Context) {
	t := time.NewTimer(time.Until(d.grid.Next(time.Now(), history.Step)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := time.Now()
			d.hist.Add(now, d.historySamples(now))
			t.Reset(time.Until(d.grid.Next(now, history.Step)))
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
