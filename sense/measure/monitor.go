// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
)

// Monitor follows a target's latency and throughput for macake monitor:
// it probes the reflectors, reads the byte counters of the interface that
// carries the default route, follows that route to another interface, and
// forgets the baselines after a sleep.
type Monitor struct {
	target Target
	every  time.Duration
	facts  linkfacts.Source
	prober *probe.Prober
}

// NewMonitor opens the probes to t's reflectors (each every
// t.ProbeInterval), so that a refusal to open ICMP sockets is told before
// any output. Without t.Interface (no default route yet) the byte counters
// wait for facts to name one; facts may be nil, and then the interface
// never changes. Run hands over a MonitorLine every every.
func NewMonitor(t Target, every time.Duration, facts linkfacts.Source) (*Monitor, error) {
	p, err := newProber(t.Probes(), t.ProbeInterval, probe.DefaultTimeout, t.BoundInterface())
	if err != nil {
		return nil, err
	}
	return &Monitor{target: t, every: every, facts: facts, prober: p}, nil
}

// Run monitors until ctx ends, handing each period's line to line, and
// returns the summary of the whole run. It may be called once: it closes
// the probes' sockets as it returns.
func (mon *Monitor) Run(ctx context.Context, line func(MonitorLine)) MonitorSummary {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := mon.prober
	sampler := ifstat.NewSampler(ifstat.Config{Interface: mon.target.Interface})
	done := make(chan struct{}, 2)
	running := 1
	go func() { p.Run(ctx); done <- struct{}{} }()
	// The byte counters need an interface: without a default route the
	// sampler starts when one appears.
	var loads <-chan ifstat.LoadSample
	startSampler := func() {
		running++
		loads = sampler.Samples()
		go func() { sampler.Run(ctx); done <- struct{}{} }()
	}
	if mon.target.Interface != "" {
		startSampler()
	}
	var facts <-chan linkfacts.Event
	if mon.facts != nil {
		facts = linkfacts.Watch(ctx, mon.facts, linkfacts.WatchConfig{})
	}

	m := newMonitorState(time.Now(), mon.target.Interface)
	tick := time.NewTicker(mon.every)
	defer tick.Stop()
	samples := p.Samples()
	for samples != nil || loads != nil {
		select {
		case s, ok := <-samples:
			if !ok {
				samples = nil
				continue
			}
			m.addSample(s)
		case ls, ok := <-loads:
			if !ok {
				loads = nil
				continue
			}
			m.addLoad(ls)
		case ev, ok := <-facts:
			if !ok {
				facts = nil
				continue
			}
			if def, found := linkfacts.DefaultInterface(ev.Facts); found && def.Name != m.iface && ev.Err == nil {
				m.iface = def.Name
				sampler.SetInterface(def.Name)
				if loads == nil && samples != nil {
					startSampler()
				}
			}
			if ev.Woke {
				sampler.Rebaseline()
				m.rebaseline()
			}
		case now := <-tick.C:
			line(m.period(now, p.Stalled(now, 2*time.Second)))
		}
	}
	for range running {
		<-done
	}
	return m.summary(time.Now(), p.Stats())
}

// reservoir keeps a bounded uniform sample of a long series (Vitter's
// algorithm R), so that a monitor running for days has fixed memory and
// still gives sound percentiles.
type reservoir struct {
	n   int
	buf []time.Duration
	rnd *rand.Rand
}

const reservoirSize = 20000

func (r *reservoir) add(d time.Duration) {
	r.n++
	if len(r.buf) < reservoirSize {
		r.buf = append(r.buf, d)
		return
	}
	if r.rnd == nil {
		r.rnd = rand.New(rand.NewPCG(1, 2))
	}
	if j := r.rnd.IntN(r.n); j < reservoirSize {
		r.buf[j] = d
	}
}

// reflectorState follows one reflector.
type reflectorState struct {
	addr                      netip.Addr
	rtt, down, up             probe.Baseline
	lastRTT, lastDelta        time.Duration
	replies, lost             int
	rtts, deltas              reservoir
	periodReplies, periodLost int
	method                    probe.Method
}

// monitorState aggregates samples into per-period lines and a summary. It
// is pure (no I/O, no clock of its own) so tests feed it directly.
type monitorState struct {
	start      time.Time
	iface      string
	reflectors map[netip.Addr]*reflectorState
	order      []netip.Addr
	// this period
	rtts, deltas, downDeltas, upDeltas []time.Duration
	rxBytes, txBytes                   uint64
	loadTime                           time.Duration
	loadProblem                        string
	// whole run
	allDeltas reservoir
}

func newMonitorState(start time.Time, iface string) *monitorState {
	return &monitorState{start: start, iface: iface, reflectors: map[netip.Addr]*reflectorState{}}
}

func (m *monitorState) reflector(a netip.Addr) *reflectorState {
	r := m.reflectors[a]
	if r == nil {
		r = &reflectorState{addr: a}
		m.reflectors[a] = r
		m.order = append(m.order, a)
	}
	return r
}

func (m *monitorState) addSample(s probe.Sample) {
	r := m.reflector(s.Reflector)
	r.method = s.Method
	if s.Kind != probe.KindReply {
		r.lost++
		r.periodLost++
		return
	}
	r.replies++
	r.periodReplies++
	delta := r.rtt.Update(s.RTT)
	r.lastRTT, r.lastDelta = s.RTT, delta
	r.rtts.add(s.RTT)
	r.deltas.add(delta)
	m.allDeltas.add(delta)
	m.rtts = append(m.rtts, s.RTT)
	m.deltas = append(m.deltas, delta)
	if s.OWD {
		m.downDeltas = append(m.downDeltas, r.down.Update(s.DownOWD))
		m.upDeltas = append(m.upDeltas, r.up.Update(s.UpOWD))
	}
}

func (m *monitorState) addLoad(ls ifstat.LoadSample) {
	if !ls.Valid {
		m.loadProblem = ls.Problem
		return
	}
	m.rxBytes += ls.RxBytes
	m.txBytes += ls.TxBytes
	m.loadTime += ls.Interval
}

// rebaseline forgets the baselines after a sleep: the path may differ.
func (m *monitorState) rebaseline() {
	for _, r := range m.reflectors {
		r.rtt, r.down, r.up = probe.Baseline{}, probe.Baseline{}, probe.Baseline{}
	}
}

// MonitorLine is one period of a Monitor, as macake monitor prints it:
// its JSON form, and Text for people.
type MonitorLine struct {
	Time        time.Time          `json:"time"`
	Interface   string             `json:"interface"`
	Replies     int                `json:"replies"`
	Lost        int                `json:"lost"`
	RTTP50      *int64             `json:"rtt_p50_us"`
	DeltaP50    *int64             `json:"delta_p50_us"`
	DeltaP90    *int64             `json:"delta_p90_us"`
	BaselineP50 *int64             `json:"baseline_us"`
	DownDelta   *int64             `json:"down_delta_p50_us,omitempty"`
	UpDelta     *int64             `json:"up_delta_p50_us,omitempty"`
	RxBits      *int64             `json:"rx_bits_per_second"`
	TxBits      *int64             `json:"tx_bits_per_second"`
	LoadProblem string             `json:"load_problem,omitempty"`
	Stalled     bool               `json:"stalled"`
	Reflectors  []MonitorReflector `json:"reflectors"`
}

// MonitorReflector is one reflector's part of a MonitorLine.
type MonitorReflector struct {
	Address  string `json:"address"`
	Method   string `json:"method,omitempty"`
	Replies  int    `json:"replies"`
	Lost     int    `json:"lost"`
	RTT      *int64 `json:"rtt_us"`
	Baseline *int64 `json:"baseline_us"`
	Delta    *int64 `json:"delta_us"`
}

func optMicros(d time.Duration, ok bool) *int64 {
	if !ok {
		return nil
	}
	return jsonMicros(d)
}

func (m *monitorState) period(now time.Time, stalled bool) MonitorLine {
	l := MonitorLine{Time: now.Round(time.Millisecond), Interface: m.iface, Stalled: stalled, LoadProblem: m.loadProblem, Reflectors: []MonitorReflector{}}
	if m.iface == "" {
		l.LoadProblem = "no default route"
	}
	var bases []time.Duration
	for _, a := range m.order {
		r := m.reflectors[a]
		l.Replies += r.periodReplies
		l.Lost += r.periodLost
		rl := MonitorReflector{Address: a.String(), Replies: r.periodReplies, Lost: r.periodLost}
		if r.method != 0 {
			rl.Method = r.method.String()
		}
		if r.replies > 0 {
			rl.RTT, rl.Baseline, rl.Delta = jsonMicros(r.lastRTT), jsonMicros(r.rtt.Value()), jsonMicros(r.lastDelta)
			bases = append(bases, r.rtt.Value())
		}
		l.Reflectors = append(l.Reflectors, rl)
		r.periodReplies, r.periodLost = 0, 0
	}
	l.RTTP50 = optMicros(probe.Percentile(m.rtts, 50), len(m.rtts) > 0)
	l.DeltaP50 = optMicros(probe.Percentile(m.deltas, 50), len(m.deltas) > 0)
	l.DeltaP90 = optMicros(probe.Percentile(m.deltas, 90), len(m.deltas) > 0)
	l.BaselineP50 = optMicros(probe.Percentile(bases, 50), len(bases) > 0)
	l.DownDelta = optMicros(probe.Percentile(m.downDeltas, 50), len(m.downDeltas) > 0)
	l.UpDelta = optMicros(probe.Percentile(m.upDeltas, 50), len(m.upDeltas) > 0)
	if m.loadTime > 0 {
		rx := int64(float64(m.rxBytes) * 8 / m.loadTime.Seconds())
		tx := int64(float64(m.txBytes) * 8 / m.loadTime.Seconds())
		l.RxBits, l.TxBits = &rx, &tx
	}
	m.rtts, m.deltas, m.downDeltas, m.upDeltas = m.rtts[:0], m.deltas[:0], m.downDeltas[:0], m.upDeltas[:0]
	m.rxBytes, m.txBytes, m.loadTime, m.loadProblem = 0, 0, 0, ""
	return l
}

func usOrDash(v *int64, signed bool) string {
	if v == nil {
		return "-"
	}
	d := time.Duration(*v) * time.Microsecond
	if signed {
		return shape.FormatLatencyChange(d)
	}
	return shape.FormatLatency(d)
}

func rateOrDash(v *int64) string {
	if v == nil {
		return "-"
	}
	return shape.FormatApprox(float64(*v))
}

// Text renders the line for people, e.g.
// "21:04:05  rtt 23.4ms  delta +2.4ms p90 +5.1ms  base 21.0ms  loss 0/20  down 45.2 Mbit/s  up 3.1 Mbit/s".
func (l MonitorLine) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  ", l.Time.Local().Format("15:04:05"))
	if l.Stalled && l.Replies == 0 {
		fmt.Fprintf(&b, "stalled: no reply from any reflector (%d lost)", l.Lost)
	} else {
		fmt.Fprintf(&b, "rtt %s  delta %s p90 %s  base %s", usOrDash(l.RTTP50, false), usOrDash(l.DeltaP50, true), usOrDash(l.DeltaP90, true), usOrDash(l.BaselineP50, false))
		if l.DownDelta != nil {
			fmt.Fprintf(&b, "  owd down %s up %s", usOrDash(l.DownDelta, true), usOrDash(l.UpDelta, true))
		}
		fmt.Fprintf(&b, "  loss %d/%d", l.Lost, l.Lost+l.Replies)
	}
	fmt.Fprintf(&b, "  down %s  up %s", rateOrDash(l.RxBits), rateOrDash(l.TxBits))
	if l.LoadProblem != "" && l.RxBits == nil {
		fmt.Fprintf(&b, " (%s)", l.LoadProblem)
	}
	return b.String()
}

// MonitorSummary is the whole run of a Monitor, printed when it stops.
type MonitorSummary struct {
	DurationMs  int64              `json:"duration_ms"`
	Replies     int                `json:"replies"`
	Lost        int                `json:"lost"`
	LossPercent float64            `json:"loss_percent"`
	DeltaP50    *int64             `json:"delta_p50_us"`
	DeltaP90    *int64             `json:"delta_p90_us"`
	Foreign     int                `json:"foreign_replies"`
	Reflectors  []ReflectorSummary `json:"reflectors"`
}

// ReflectorSummary is one reflector's part of a MonitorSummary.
type ReflectorSummary struct {
	Address    string `json:"address"`
	Method     string `json:"method,omitempty"`
	Replies    int    `json:"replies"`
	Lost       int    `json:"lost"`
	Duplicates int    `json:"duplicates"`
	Late       int    `json:"late"`
	Baseline   *int64 `json:"baseline_us"`
	RTTP50     *int64 `json:"rtt_p50_us"`
	RTTP90     *int64 `json:"rtt_p90_us"`
	DeltaP50   *int64 `json:"delta_p50_us"`
	DeltaP90   *int64 `json:"delta_p90_us"`
}

func (m *monitorState) summary(now time.Time, st probe.Stats) MonitorSummary {
	s := MonitorSummary{DurationMs: now.Sub(m.start).Milliseconds(), Foreign: st.Foreign, Reflectors: []ReflectorSummary{}}
	extra := map[netip.Addr]probe.ReflectorStats{}
	for _, rs := range st.Reflectors {
		extra[rs.Reflector] = rs
	}
	for _, a := range m.order {
		r := m.reflectors[a]
		s.Replies += r.replies
		s.Lost += r.lost
		has := r.replies > 0
		rs := ReflectorSummary{
			Address: a.String(), Replies: r.replies, Lost: r.lost,
			Duplicates: extra[a].Duplicates, Late: extra[a].Late,
			Baseline: optMicros(r.rtt.Value(), has),
			RTTP50:   optMicros(probe.Percentile(r.rtts.buf, 50), has), RTTP90: optMicros(probe.Percentile(r.rtts.buf, 90), has),
			DeltaP50: optMicros(probe.Percentile(r.deltas.buf, 50), has), DeltaP90: optMicros(probe.Percentile(r.deltas.buf, 90), has),
		}
		if r.method != 0 {
			rs.Method = r.method.String()
		}
		s.Reflectors = append(s.Reflectors, rs)
	}
	if total := s.Replies + s.Lost; total > 0 {
		s.LossPercent = float64(s.Lost) * 100 / float64(total)
	}
	has := len(m.allDeltas.buf) > 0
	s.DeltaP50 = optMicros(probe.Percentile(m.allDeltas.buf, 50), has)
	s.DeltaP90 = optMicros(probe.Percentile(m.allDeltas.buf, 90), has)
	return s
}

// WriteText writes the summary for people: the totals, then a table of
// the reflectors.
func (s MonitorSummary) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\n%d replies, %d lost (%.1f%%) in %v; delay above baseline p50 %s, p90 %s\n",
		s.Replies, s.Lost, s.LossPercent, (time.Duration(s.DurationMs) * time.Millisecond).Round(time.Second), usOrDash(s.DeltaP50, true), usOrDash(s.DeltaP90, true))
	fmt.Fprintf(w, "%-16s %-9s %7s %5s %9s %9s %9s %9s %9s\n", "reflector", "method", "replies", "lost", "baseline", "rtt p50", "rtt p90", "delta p50", "delta p90")
	for _, r := range s.Reflectors {
		fmt.Fprintf(w, "%-16s %-9s %7d %5d %9s %9s %9s %9s %9s\n", r.Address, r.Method, r.Replies, r.Lost,
			usOrDash(r.Baseline, false), usOrDash(r.RTTP50, false), usOrDash(r.RTTP90, false), usOrDash(r.DeltaP50, true), usOrDash(r.DeltaP90, true))
	}
}
