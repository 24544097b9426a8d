// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/macake/macake/logging"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/sense/probe"
)

var monitorCmd = &command{
	name:  "monitor",
	args:  "[--json] [--reflector ADDR ...] [--interval D] [--every D] [--duration D] [--log-file PATH]",
	short: "Sample latency to the reflectors continuously, without shaping.",
	long: `Probes the reflectors (the matching policy's, the defaults, or --reflector)
and reads the default-route interface's byte counters, and prints one line
per second: the round-trip time, the delay above each reflector's rolling
baseline (p50 and p90 over the reflectors' samples of that second), the
losses, and the throughput each way (shown as - while no interface
carries the default route; --reflector still probes then). With ICMP
timestamps the one-way delay deltas of each direction are shown too.
--json prints one JSON object per line instead. Interrupt it (Ctrl-C)
for a summary: samples, loss, baselines, and p50/p90 of the delay. --log-file writes the lines to a file
instead, rotated at 10 MiB with 5 old files kept (the LaunchAgent passes
~/Library/Logs/macake/monitor.log): a line a second is about 10 MB a day.

The baseline follows cake-autorate's: it drops at once to a lower delay and
creeps up over minutes, so a queue shows as a delta above it. No root is
needed; on Linux unprivileged ICMP needs net.ipv4.ping_group_range.`,
}

func init() { monitorCmd.run = runMonitor }

func runMonitor(e *env, args []string) int {
	fs := monitorCmd.flags()
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	var interval, every, duration time.Duration
	durationVar(fs, &interval, "interval", 0, "probe interval per reflector; 0 means the policy's probe_interval (300ms by default)")
	durationVar(fs, &every, "every", time.Second, "print a line this often")
	durationVar(fs, &duration, "duration", 0, "stop after this long; 0 runs until interrupted")
	logFile := fs.String("log-file", "", "write the lines and the summary to `PATH`, rotated, instead of standard output")
	var reflectors addrList
	fs.Var(&reflectors, "reflector", "reflector `ADDR` to probe instead of the policy's or the defaults (repeatable)")
	if done, code := monitorCmd.parse(e, fs, args); done {
		return code
	}
	if done, code := monitorCmd.noArgs(e, fs); done {
		return code
	}
	// The flags' grammar refuses negative durations.
	if (interval > 0 && interval < 10*time.Millisecond) || every < 100*time.Millisecond {
		fmt.Fprintln(e.stderr, "macake monitor: --interval must be at least 10ms, --every at least 100ms")
		return exitUsage
	}
	var out io.Writer = e.stdout
	if *logFile != "" {
		f, err := logging.OpenFile(*logFile, logging.FileOptions{})
		if err != nil {
			fmt.Fprintf(e.stderr, "macake monitor: %v\n", err)
			return exitFailure
		}
		defer f.Close()
		out = f
	}
	target, err := resolveTarget(e, "", reflectors)
	switch {
	case errors.Is(err, measure.ErrNoDefaultRoute) && len(reflectors) > 0:
		// The given reflectors may well be reachable (on the LAN, in a
		// lab): probe them; throughput waits for a default route.
		fmt.Fprintf(e.stderr, "note: %v; probing only, throughput is not shown until a default route appears\n", err)
	case errors.Is(err, measure.ErrNoDefaultRoute):
		fmt.Fprintf(e.stderr, "macake monitor: %v (or pass --reflector ADDR to probe a reachable host without throughput)\n", err)
		return exitFailure
	case err != nil:
		fmt.Fprintf(e.stderr, "macake monitor: %v\n", err)
		return exitFailure
	}
	if interval > 0 {
		target.ProbeInterval = interval
	}
	p, err := newProber(target.Reflectors, target.ProbeInterval, probe.DefaultTimeout)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake monitor: %v\n", err)
		return exitFailure
	}
	ctx := e.ctx
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	sampler := ifstat.NewSampler(ifstat.Config{Interface: target.Interface})
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
	if target.Interface != "" {
		startSampler()
	}
	var facts <-chan linkfacts.Event
	if src, err := linkfacts.FromEnv(e.getenv, linkfacts.SystemOptions{}); err == nil {
		facts = linkfacts.Watch(ctx, src, linkfacts.WatchConfig{})
		if c, ok := src.(io.Closer); ok {
			defer c.Close()
		}
	}

	if !*asJSON {
		iface := target.Interface
		if iface == "" {
			iface = "(no default route)"
		}
		header := fmt.Sprintf("monitoring %s: %d reflectors every %v (%s); Ctrl-C for a summary\n", iface, len(target.Reflectors), target.ProbeInterval, measure.DescribeTargets(target.Reflectors))
		fmt.Fprint(e.stderr, header)
		if *logFile != "" {
			// The log says when each run began and what it probes.
			fmt.Fprintf(out, "%s  %s", time.Now().Format("2006-01-02 15:04:05"), header)
		}
	}
	m := newMonitorState(time.Now(), target.Interface)
	tick := time.NewTicker(every)
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
			l := m.period(now, p.Stalled(now, 2*time.Second))
			if *asJSON {
				b, _ := json.Marshal(l)
				fmt.Fprintln(out, string(b))
			} else if *logFile != "" {
				// A log outlives a day: its lines carry the date.
				fmt.Fprintln(out, l.Time.Local().Format("2006-01-02 ")+l.text())
			} else {
				fmt.Fprintln(out, l.text())
			}
		}
	}
	for range running {
		<-done
	}
	sum := m.summary(time.Now(), p.Stats())
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"summary": sum})
		fmt.Fprintln(out, string(b))
	} else {
		sum.writeText(out)
	}
	if sum.Replies == 0 {
		fmt.Fprintf(e.stderr, "macake monitor: no reflector answered (%s): check the network, or pass --reflector ADDR\n", measure.DescribeTargets(target.Reflectors))
		return exitFailure
	}
	return exitOK
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

// monitorLine is one period's output (also its JSON form).
type monitorLine struct {
	Time        time.Time        `json:"time"`
	Interface   string           `json:"interface"`
	Replies     int              `json:"replies"`
	Lost        int              `json:"lost"`
	RTTP50      *int64           `json:"rtt_p50_us"`
	DeltaP50    *int64           `json:"delta_p50_us"`
	DeltaP90    *int64           `json:"delta_p90_us"`
	BaselineP50 *int64           `json:"baseline_us"`
	DownDelta   *int64           `json:"down_delta_p50_us,omitempty"`
	UpDelta     *int64           `json:"up_delta_p50_us,omitempty"`
	RxBits      *int64           `json:"rx_bits_per_second"`
	TxBits      *int64           `json:"tx_bits_per_second"`
	LoadProblem string           `json:"load_problem,omitempty"`
	Stalled     bool             `json:"stalled"`
	Reflectors  []monitorRefLine `json:"reflectors"`
}

type monitorRefLine struct {
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

func (m *monitorState) period(now time.Time, stalled bool) monitorLine {
	l := monitorLine{Time: now.Round(time.Millisecond), Interface: m.iface, Stalled: stalled, LoadProblem: m.loadProblem, Reflectors: []monitorRefLine{}}
	if m.iface == "" {
		l.LoadProblem = "no default route"
	}
	var bases []time.Duration
	for _, a := range m.order {
		r := m.reflectors[a]
		l.Replies += r.periodReplies
		l.Lost += r.periodLost
		rl := monitorRefLine{Address: a.String(), Replies: r.periodReplies, Lost: r.periodLost}
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
		return measure.SignedDuration(d)
	}
	return measure.HumanDuration(d)
}

func rateOrDash(v *int64) string {
	if v == nil {
		return "-"
	}
	return measure.HumanRate(float64(*v))
}

// text renders the line for people, e.g.
// "21:04:05  rtt 23.4ms  delta +2.4ms p90 +5.1ms  base 21.0ms  loss 0/20  down 45.2 Mbit/s  up 3.1 Mbit/s".
func (l monitorLine) text() string {
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

// monitorSummary is printed when the monitor stops.
type monitorSummary struct {
	DurationMs  int64              `json:"duration_ms"`
	Replies     int                `json:"replies"`
	Lost        int                `json:"lost"`
	LossPercent float64            `json:"loss_percent"`
	DeltaP50    *int64             `json:"delta_p50_us"`
	DeltaP90    *int64             `json:"delta_p90_us"`
	Foreign     int                `json:"foreign_replies"`
	Reflectors  []reflectorSummary `json:"reflectors"`
}

type reflectorSummary struct {
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

func (m *monitorState) summary(now time.Time, st probe.Stats) monitorSummary {
	s := monitorSummary{DurationMs: now.Sub(m.start).Milliseconds(), Foreign: st.Foreign, Reflectors: []reflectorSummary{}}
	extra := map[netip.Addr]probe.ReflectorStats{}
	for _, rs := range st.Reflectors {
		extra[rs.Reflector] = rs
	}
	for _, a := range m.order {
		r := m.reflectors[a]
		s.Replies += r.replies
		s.Lost += r.lost
		has := r.replies > 0
		rs := reflectorSummary{
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

func (s monitorSummary) writeText(w io.Writer) {
	fmt.Fprintf(w, "\n%d replies, %d lost (%.1f%%) in %v; delay above baseline p50 %s, p90 %s\n",
		s.Replies, s.Lost, s.LossPercent, (time.Duration(s.DurationMs) * time.Millisecond).Round(time.Second), usOrDash(s.DeltaP50, true), usOrDash(s.DeltaP90, true))
	fmt.Fprintf(w, "%-16s %-9s %7s %5s %9s %9s %9s %9s %9s\n", "reflector", "method", "replies", "lost", "baseline", "rtt p50", "rtt p90", "delta p50", "delta p90")
	for _, r := range s.Reflectors {
		fmt.Fprintf(w, "%-16s %-9s %7d %5d %9s %9s %9s %9s %9s\n", r.Address, r.Method, r.Replies, r.Lost,
			usOrDash(r.Baseline, false), usOrDash(r.RTTP50, false), usOrDash(r.RTTP90, false), usOrDash(r.DeltaP50, true), usOrDash(r.DeltaP90, true))
	}
}
