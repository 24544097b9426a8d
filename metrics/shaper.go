// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"slices"
	"sync"
	"time"

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
// counters, so they are written as read rather than counted here, and a
// shaper the reading no longer has disappears with it.
type shaperCollector struct {
	mu   sync.Mutex
	last []ShaperCounters
	at   time.Time
}

func newShaperCollector() *shaperCollector { return &shaperCollector{} }

// shaperFamilies are the families of a reading, in name order.
var shaperFamilies = []struct {
	name, help, typ string
	value           func(ShaperCounters) uint64
}{
	{"shaper_backlog_bytes", "Bytes queued in the shaper at the last reading.", typeGauge, func(s ShaperCounters) uint64 { return s.BacklogBytes }},
	{"shaper_backlog_packets", "Packets queued in the shaper at the last reading.", typeGauge, func(s ShaperCounters) uint64 { return s.BacklogPackets }},
	{"shaper_bytes_total", "Bytes the shaper took in (dummynet pipe) or sent (tc root qdisc), from the kernel's counters (read on the drift tick and when status asks).", typeCounter, func(s ShaperCounters) uint64 { return s.Bytes }},
	{"shaper_drops_total", "Packets the shaper dropped because its queue was full.", typeCounter, func(s ShaperCounters) uint64 { return s.Drops }},
	{"shaper_overlimits_total", "Times the shaper held a packet back for its rate (tc only; 0 on dummynet).", typeCounter, func(s ShaperCounters) uint64 { return s.Overlimits }},
	{"shaper_packets_total", "Packets the shaper took in (dummynet) or sent (tc).", typeCounter, func(s ShaperCounters) uint64 { return s.Packets }},
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
	for _, f := range shaperFamilies {
		if len(last) == 0 {
			break
		}
		name := Namespace + "_" + f.name
		e.header(name, f.help, f.typ)
		for i, s := range last {
			e.sampleUint(name, labels[i], f.value(s))
		}
	}
	e.single(Namespace+"_shaper_stats_timestamp_seconds", "Unix time of the last reading of the shapers' counters.", typeGauge, float64(at.UnixMilli())/1e3)
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
