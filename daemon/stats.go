// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/daemon/statusbuild"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/shape"
)

// statsMaxAge is how old the shapers' counters may be when someone asks
// for the status (macake status, the status page): fresher than this,
// the last reading is shown again instead of running another read. So a
// page left open costs one read-only command every 2 s, and the drift
// tick reads them every 30 s for the metrics; the controllers' hot path
// never does.
const statsMaxAge = 2 * time.Second

// shaperStats is the last reading of the shapers' counters
// (backend.StatsReader). Its mutex also keeps two reads from running at
// once: a caller that waited for one finds it fresh.
type shaperStats struct {
	mu     sync.Mutex
	at     time.Time
	byName map[string]backend.ShaperStats
	err    string
}

// refreshStats reads the counters when the last reading is older than
// maxAge (0: always) and some link is shaped, and hands them to the
// metrics. Safe to call from any goroutine.
func (d *Daemon) refreshStats(ctx context.Context, maxAge time.Duration) {
	sr, ok := d.cfg.Backend.(backend.StatsReader)
	if !ok {
		return
	}
	names := d.shaperNames()
	s := &d.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(names) == 0 || maxAge > 0 && time.Since(s.at) < maxAge {
		return
	}
	stats, err := sr.ShaperStats(ctx)
	s.at = time.Now()
	if err != nil {
		s.err, s.byName = err.Error(), nil
		d.log.Debug("reading the shapers' counters", "error", err)
		return
	}
	s.err, s.byName = "", make(map[string]backend.ShaperStats, len(stats))
	for _, st := range stats {
		s.byName[st.Name] = st
	}
	if m := d.cfg.Metrics; m != nil {
		var samples []metrics.ShaperCounters
		for name, ld := range names {
			if st, ok := s.byName[name]; ok {
				samples = append(samples, metrics.ShaperCounters{Link: ld.link, Direction: ld.dir, Bytes: st.Bytes, Packets: st.Packets,
					Drops: st.Drops, Overlimits: st.Overlimits, BacklogBytes: st.BacklogBytes, BacklogPackets: st.BacklogPackets, Tins: st.Tins})
			}
		}
		m.SetShaperCounters(samples, s.at)
	}
}

// cachedStats returns the shaper's counters as last read, and why they
// could not be read ("" when they could, or were never asked for).
func (d *Daemon) cachedStats(name string) (*statusapi.ShaperStats, string) {
	s := &d.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byName[name]
	if !ok {
		return nil, s.err
	}
	return statusbuild.ShaperStats(st, s.at), ""
}

// linkDir is one direction of a link.
type linkDir struct {
	link string
	dir  shape.Direction
}

// shaperNames maps the name of every installed shaper to its link and
// direction, from the loop's last published view.
func (d *Daemon) shaperNames() map[string]linkDir {
	names, ok := d.cfg.Backend.(backend.ShaperReader)
	live := d.pubLive.Load()
	if !ok || live == nil {
		return nil
	}
	out := map[string]linkDir{}
	for _, l := range live.Links {
		for _, dir := range shape.Directions {
			if n := names.ShaperName(l, dir); n != "" {
				out[n] = linkDir{l.Name, dir}
			}
		}
	}
	return out
}
