// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/shape"
)

// ShaperCounters are one shaper's kernel counters, as the daemon last
// read them (backend.ShaperStats).
type ShaperCounters struct {
	Link      string
	Direction shape.Direction
	// Bytes, Packets, Drops and Overlimits are cumulative since the
	// shaper was created; BacklogBytes and BacklogPackets are queued now.
	Bytes, Packets, Drops, Overlimits uint64
	BacklogBytes, BacklogPackets      uint64
	// Tins are CAKE's tins (nil for other shapers): each becomes the
	// shaper_tin_* series with a tin label.
	Tins []backend.TinStats
}

// shaperCollector reports the last reading as it is: the kernel keeps the
// counters, so they are written as read rather than counted here, and a
// shaper the reading no longer has disappears with it.
type shaperCollector struct {
	mu   sync.Mutex
	last []ShaperCounters
	at   time.Time
}

func newShaperCollector() *shaperCollector { return &shaperCollector{} }

// shaperFamilies are the families of a reading, in name order.
var shaperFamilies = []seriesFamily[ShaperCounters, uint64]{
	{"shaper_backlog_bytes", "Bytes queued in the shaper at the last reading.", typeGauge, func(s ShaperCounters) uint64 { return s.BacklogBytes }},
	{"shaper_backlog_packets", "Packets queued in the shaper at the last reading.", typeGauge, func(s ShaperCounters) uint64 { return s.BacklogPackets }},
	{"shaper_bytes_total", "Bytes the shaper took in (dummynet pipe) or sent (tc root qdisc), from the kernel's counters (read on the drift tick and when status asks).", typeCounter, func(s ShaperCounters) uint64 { return s.Bytes }},
	{"shaper_drops_total", "Packets the shaper dropped because its queue was full.", typeCounter, func(s ShaperCounters) uint64 { return s.Drops }},
	{"shaper_overlimits_total", "Times the shaper held a packet back for its rate (tc only; 0 on dummynet).", typeCounter, func(s ShaperCounters) uint64 { return s.Overlimits }},
	{"shaper_packets_total", "Packets the shaper took in (dummynet) or sent (tc).", typeCounter, func(s ShaperCounters) uint64 { return s.Packets }},
}

// tinFamilies are the families of CAKE's tins, in name order: tc -s's
// table, one series per tin.
var tinFamilies = []seriesFamily[backend.TinStats, float64]{
	{"shaper_tin_ack_drops_total", "TCP ACKs CAKE's ACK filter removed from the tin.", typeCounter, func(t backend.TinStats) float64 { return float64(t.ACKDrops) }},
	{"shaper_tin_backlog_bytes", "Bytes queued in the CAKE tin at the last reading.", typeGauge, func(t backend.TinStats) float64 { return float64(t.BacklogBytes) }},
	{"shaper_tin_bulk_flows", "Flows CAKE schedules as bulk (backlogged) in the tin at the last reading.", typeGauge, func(t backend.TinStats) float64 { return float64(t.BulkFlows) }},
	{"shaper_tin_bytes_total", "Bytes that entered the CAKE tin, the ones it dropped included.", typeCounter, func(t backend.TinStats) float64 { return float64(t.Bytes) }},
	{"shaper_tin_delay_average_seconds", "Queueing delay CAKE measures in the tin, its moving average.", typeGauge, func(t backend.TinStats) float64 { return t.AvgDelay.Seconds() }},
	{"shaper_tin_delay_base_seconds", "Queueing delay CAKE measures in the tin, its floor.", typeGauge, func(t backend.TinStats) float64 { return t.BaseDelay.Seconds() }},
	{"shaper_tin_delay_peak_seconds", "Queueing delay CAKE measures in the tin, its recent peak.", typeGauge, func(t backend.TinStats) float64 { return t.PeakDelay.Seconds() }},
	{"shaper_tin_drops_total", "Packets CAKE dropped from the tin (its AQM, or its memory limit).", typeCounter, func(t backend.TinStats) float64 { return float64(t.Drops) }},
	{"shaper_tin_ecn_marks_total", "Packets CAKE marked with ECN in the tin instead of dropping them.", typeCounter, func(t backend.TinStats) float64 { return float64(t.ECNMarks) }},
	{"shaper_tin_packets_total", "Packets that entered the CAKE tin, the ones it dropped included.", typeCounter, func(t backend.TinStats) float64 { return float64(t.Packets) }},
	{"shaper_tin_sparse_flows", "Flows CAKE schedules as sparse (new or light) in the tin at the last reading.", typeGauge, func(t backend.TinStats) float64 { return float64(t.SparseFlows) }},
	{"shaper_tin_threshold_bits_per_second", "The rate up to which the tin keeps its priority.", typeGauge, func(t backend.TinStats) float64 { return float64(t.ThresholdBits) }},
	{"shaper_tin_unresponsive_flows", "Flows in the tin that do not slow down for CAKE's drops, at the last reading.", typeGauge, func(t backend.TinStats) float64 { return float64(t.UnresponsiveFlows) }},
}

// write writes the last reading; nothing before the first.
func (c *shaperCollector) write(e *expo) {
	c.mu.Lock()
	last, at := c.last, c.at
	c.mu.Unlock()
	if at.IsZero() {
		return
	}
	labels := make([]string, len(last))
	for i, s := range last {
		labels[i] = renderLabels([]string{"link", "direction"}, []string{s.Link, s.Direction.String()}, "", "")
	}
	writeFamilies(e, shaperFamilies, labels, last)
	e.single(Namespace+"_shaper_stats_timestamp_seconds", "Unix time of the last reading of the shapers' counters.", typeGauge, float64(at.UnixMilli())/1e3)
	type tinSample struct {
		labels string
		tin    backend.TinStats
	}
	var tins []tinSample
	for _, s := range last {
		for _, t := range s.Tins {
			tins = append(tins, tinSample{renderLabels([]string{"link", "direction", "tin"}, []string{s.Link, s.Direction.String(), t.Name}, "", ""), t})
		}
	}
	// In label order, as every other family: a scraper's diff stays stable.
	slices.SortFunc(tins, func(a, b tinSample) int { return strings.Compare(a.labels, b.labels) })
	tinLabels := make([]string, len(tins))
	tinStats := make([]backend.TinStats, len(tins))
	for i, t := range tins {
		tinLabels[i], tinStats[i] = t.labels, t.tin
	}
	writeFamilies(e, tinFamilies, tinLabels, tinStats)
}

// seriesFamily is a metric family whose samples are read from values of T.
type seriesFamily[T any, V uint64 | float64] struct {
	name, help, typ string
	value           func(T) V
}

// writeFamilies writes each family's header and a sample per series:
// labels[i] with the family's value of series[i]. It writes nothing for
// no series.
func writeFamilies[T any, V uint64 | float64](e *expo, families []seriesFamily[T, V], labels []string, series []T) {
	if len(series) == 0 {
		return
	}
	for _, f := range families {
		name := Namespace + "_" + f.name
		e.header(name, f.help, f.typ)
		for i, s := range series {
			switch v := any(f.value(s)).(type) {
			case uint64:
				e.sampleUint(name, labels[i], v)
			case float64:
				e.sample(name, labels[i], v)
			}
		}
	}
}

// SetShaperCounters replaces the shapers' counters with a reading taken
// at at: the series of a shaper it lacks go away.
func (m *Metrics) SetShaperCounters(read []ShaperCounters, at time.Time) {
	c := m.shapers
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last, c.at = append([]ShaperCounters(nil), read...), at
}

// removeLink drops a link's shapers from the last reading (a copy:
// Collect may be reading the old one).
func (c *shaperCollector) removeLink(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = slices.DeleteFunc(slices.Clone(c.last), func(s ShaperCounters) bool { return s.Link == name })
}
