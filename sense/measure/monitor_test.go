// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/probe"
)

func TestMonitorStateAggregatesPeriods(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m := newMonitorState(start, "en0")
	reply := func(r netip.Addr, rtt time.Duration) probe.Sample {
		return probe.Sample{Reflector: r, Kind: probe.KindReply, Method: probe.MethodEcho, RTT: rtt}
	}
	// Period 1: idle, 20 ms and 30 ms reflectors; one loss.
	for range 5 {
		m.addSample(reply(a, ms(20)))
		m.addSample(reply(b, ms(30)))
	}
	m.addSample(probe.Sample{Reflector: b, Kind: probe.KindLost})
	m.addLoad(ifstat.LoadSample{Valid: false, Problem: "first reading (baseline)"})
	m.addLoad(ifstat.LoadSample{Valid: true, Interval: 200 * time.Millisecond, RxBytes: 250_000, TxBytes: 25_000})
	l := m.period(start.Add(time.Second), false)
	if l.Replies != 10 || l.Lost != 1 || *l.DeltaP50 != 0 || *l.RTTP50 != 20_000 || *l.RxBits != 10_000_000 || *l.TxBits != 1_000_000 {
		t.Errorf("period 1: %+v", l)
	}
	if got := l.Text(); !strings.Contains(got, "loss 1/11") || !strings.Contains(got, "down 10.0 Mbit/s") || !strings.Contains(got, "delta +0.0ms") {
		t.Errorf("text %q", got)
	}
	// Period 2: +100 ms of queue on both.
	for range 5 {
		m.addSample(reply(a, ms(120)))
		m.addSample(reply(b, ms(130)))
	}
	l = m.period(start.Add(2*time.Second), false)
	if l.DeltaP50 == nil || *l.DeltaP50 < 99_000 || *l.DeltaP50 > 100_000 || l.RxBits != nil {
		t.Errorf("period 2: delta %v rx %v", l.DeltaP50, l.RxBits)
	}
	// Period 3: nothing answers.
	m.addSample(probe.Sample{Reflector: a, Kind: probe.KindUnreachable})
	l = m.period(start.Add(3*time.Second), true)
	if !strings.Contains(l.Text(), "stalled") || l.DeltaP50 != nil {
		t.Errorf("stalled period %q", l.Text())
	}
	s := m.summary(start.Add(3*time.Second), probe.Stats{})
	if s.Replies != 20 || s.Lost != 2 || s.LossPercent < 9 || s.LossPercent > 10 || len(s.Reflectors) != 2 || *s.Reflectors[0].Baseline > 21_000 {
		t.Errorf("summary %+v", s)
	}
	var out strings.Builder
	s.WriteText(&out)
	if !strings.Contains(out.String(), "20 replies, 2 lost (9.1%)") {
		t.Errorf("summary text %q", out.String())
	}
}
