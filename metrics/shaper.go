// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
}

// shaperCollector reports the last reading as it is: the kernel keeps the
// counters, so they are exported as const metrics rather than counted
// here, and a shaper the reading no longer has disappears with it.
type shaperCollector struct {
	bytes, packets, drops, overlimits, backlogBytes, backlogPackets, readAt *prometheus.Desc

	mu   sync.Mutex
	last []ShaperCounters
	at   time.Time
}

func newShaperCollector() *shaperCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	dir := []string{"link", "direction"}
	return &shaperCollector{
		bytes:          desc("shaper_bytes_total", "Bytes the shaper took in (dummynet pipe) or sent (tc root qdisc), from the kernel's counters (read on the drift tick and when status asks).", dir...),
		packets:        desc("shaper_packets_total", "Packets the shaper took in (dummynet) or sent (tc).", dir...),
		drops:          desc("shaper_drops_total", "Packets the shaper dropped because its queue was full.", dir...),
		overlimits:     desc("shaper_overlimits_total", "Times the shaper held a packet back for its rate (tc only; 0 on dummynet).", dir...),
		backlogBytes:   desc("shaper_backlog_bytes", "Bytes queued in the shaper at the last reading.", dir...),
		backlogPackets: desc("shaper_backlog_packets", "Packets queued in the shaper at the last reading.", dir...),
		readAt:         desc("shaper_stats_timestamp_seconds", "Unix time of the last reading of the shapers' counters."),
	}
}

// Describe implements prometheus.Collector.
func (c *shaperCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytes, c.packets, c.drops, c.overlimits, c.backlogBytes, c.backlogPackets, c.readAt} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *shaperCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	last, at := c.last, c.at
	c.mu.Unlock()
	if at.IsZero() {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.readAt, prometheus.GaugeValue, float64(at.UnixMilli())/1e3)
	for _, s := range last {
		ls := []string{s.Link, s.Direction.String()}
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(s.Bytes), ls...)
		ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(s.Packets), ls...)
		ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(s.Drops), ls...)
		ch <- prometheus.MustNewConstMetric(c.overlimits, prometheus.CounterValue, float64(s.Overlimits), ls...)
		ch <- prometheus.MustNewConstMetric(c.backlogBytes, prometheus.GaugeValue, float64(s.BacklogBytes), ls...)
		ch <- prometheus.MustNewConstMetric(c.backlogPackets, prometheus.GaugeValue, float64(s.BacklogPackets), ls...)
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
