// SPDX-License-Identifier: Apache-2.0

// Package metrics is macake's optional Prometheus endpoint: the shaper
// rates, delays, loads and counters of `macake watch`, plus the Go runtime
// and process metrics, in the Prometheus text format, served on loopback
// only. Nothing here runs or allocates unless the daemon calls New, which
// it does only when metrics_listen is set.
//
// The daemon holds one *Metrics, a *Link per active link (Metrics.Link) and
// a *Direction per shaped direction (Link.Direction). Those handles hold
// pre-resolved series, so an update is an atomic store or add: no map
// lookup, no label hashing, no allocation on the controller's per-sample
// path. Every method is safe for concurrent use. docs/OPERATIONS.md lists
// every metric with its meaning.
package metrics

import (
	"bufio"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/macake/macake/shape"
)

// Namespace prefixes every macake metric.
const Namespace = "macake"

// States are the values of macake_controller_state's state label, the
// controller's statuses: running (under load or after it), idle (running,
// both directions idle), sleeping (probes stopped on an idle link),
// stalled (no reflector answers, no traffic: rates frozen). Their series
// exist from the start, so a dashboard sees zeros rather than gaps.
var States = []string{"running", "idle", "sleeping", "stalled"}

// Reconcile results, the values of macake_reconciles_total's result label.
const (
	ResultNoChanges = "no_changes"
	ResultApplied   = "applied"
	ResultFailed    = "failed"
)

// Options describes the build for macake_build_info and how the endpoint
// reports its own trouble.
type Options struct {
	// Version and Commit label macake_build_info.
	Version, Commit string
	// Log receives the HTTP server's errors; nil discards them.
	Log *slog.Logger
	// Now stamps macake_reconcile_last_success_timestamp_seconds; nil
	// means time.Now.
	Now func() time.Time
}

// Metrics is every macake metric family.
type Metrics struct {
	log *slog.Logger
	now func() time.Time
	// families are the families with series of their own, written in
	// name order with the shapers', the Go runtime's and the process's.
	families []*family

	shaperRate, rateMin, rateMax, achieved, load *family
	baseline, delta, window, bloat               *family
	rateChanges                                  *family
	state, engaged                               *family
	probeSamples, probeLost                      *family
	probeRTT                                     *family
	// linkFamilies are the families with a link label, for RemoveLink.
	linkFamilies []*family

	reconciles        [3]Counter // no_changes, applied, failed
	reconcileDuration Histogram
	lastSuccess       Gauge
	driftRepairs      *family
	linkChanges       Counter
	configErrors      Gauge
	pauseEnd          *family
	shapers           *shaperCollector

	mu    sync.Mutex
	links map[string]*Link
}

// rttBuckets are the probe RTT histogram's bounds, 2.5 ms to 2 s: fibre
// next door to a saturated LTE or satellite buffer.
var rttBuckets = []float64{.0025, .005, .01, .015, .02, .03, .05, .075, .1, .15, .2, .3, .5, 1, 2}

// New builds the metrics: macake's families, macake_build_info, and the
// Go runtime's and the process's metrics, read at each scrape.
func New(opts Options) *Metrics {
	m := &Metrics{log: opts.Log, now: opts.Now, links: map[string]*Link{}}
	if m.now == nil {
		m.now = time.Now
	}
	add := func(name, help, typ string, buckets []float64, labels ...string) *family {
		f := newFamily(Namespace+"_"+name, help, typ, buckets, labels...)
		m.families = append(m.families, f)
		return f
	}
	dir := []string{"link", "direction"}
	gauge := func(name, help string, labels ...string) *family { return add(name, help, typeGauge, nil, labels...) }
	counter := func(name, help string, labels ...string) *family { return add(name, help, typeCounter, nil, labels...) }
	m.shaperRate = gauge("shaper_rate_bits_per_second", "Rate the shaper is set to (the dummynet pipe or tc class), in bit/s; 0 while no shaper is installed.", dir...)
	m.rateMin = gauge("shaper_rate_min_bits_per_second", "Lowest rate the controller may set, from the policy, in bit/s.", dir...)
	m.rateMax = gauge("shaper_rate_max_bits_per_second", "Highest rate the controller may set, from the policy, in bit/s.", dir...)
	m.achieved = gauge("achieved_rate_bits_per_second", "Traffic actually carried, from the interface byte counters, in bit/s.", dir...)
	m.load = gauge("load_ratio", "Achieved rate divided by the shaper rate (0 idle, about 1 saturated).", dir...)
	m.baseline = gauge("delay_baseline_seconds", "One-way delay to the reflectors when the link is idle (the lowest reflector baseline); NaN until the first reply.", dir...)
	m.delta = gauge("delay_delta_seconds", "One-way delay above the baseline: the queueing delay the controller steers by (mean of the reflectors' smoothed deltas); NaN until the first reply.", dir...)
	m.window = gauge("delay_window_seconds", "One-way delay above the baseline, the mean over the bufferbloat detection window: the delay the controller cuts for (delay_delta_seconds pauses under load); NaN until the first reply.", dir...)
	m.bloat = gauge("bufferbloat_samples", "Delayed samples (delay delta above the threshold) in the current detection window; bufferbloat when it reaches the vote threshold.", dir...)
	m.rateChanges = counter("rate_changes_total", "Rates the controller set, by change: cut (lowered for bufferbloat), lower (lowered for another reason: decay toward base, the minimum on sleep) or raise (raised).", "link", "direction", "change")
	m.state = gauge("controller_state", "1 for the controller's current state (running, idle, sleeping, stalled), 0 for the others.", "link", "state")
	m.engaged = gauge("shaper_engaged", "1 while the link's shaper is installed; 0 while balanced mode has released it.", "link")
	m.probeSamples = counter("probe_samples_total", "Reflector replies received.", "link", "reflector")
	m.probeLost = counter("probe_lost_total", "Probes that got no reply in time.", "link", "reflector")
	m.probeRTT = add("probe_rtt_seconds", "Round-trip time of reflector replies (probes bypass the shaper, so this is the path's own queueing plus distance).", typeHistogram, rttBuckets, "link")
	m.linkFamilies = []*family{m.shaperRate, m.rateMin, m.rateMax, m.achieved, m.load, m.baseline, m.delta, m.window, m.bloat,
		m.rateChanges, m.state, m.engaged, m.probeSamples, m.probeLost, m.probeRTT}

	reconciles := counter("reconciles_total", "Reconciles (config change, link change, drift tick, resync), by result: no_changes, applied or failed.", "result")
	for i, r := range []string{ResultNoChanges, ResultApplied, ResultFailed} {
		m.reconciles[i] = reconciles.counter(r)
	}
	m.reconcileDuration = add("reconcile_duration_seconds", "Time to observe, plan and apply one reconcile.", typeHistogram,
		[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}).histogram()
	m.lastSuccess = gauge("reconcile_last_success_timestamp_seconds", "Unix time of the last reconcile that did not fail; 0 before the first.").gauge()
	m.driftRepairs = counter("drift_repairs_total", "Changes made by someone else to what macake owns, put back, by kind (rules_missing, rules_changed, shaper_missing, shaper_changed, pf_disabled).", "kind")
	m.linkChanges = counter("link_changes_total", "Changes of the policy matching an interface (network switches, interfaces going up or down).").counter()
	m.configErrors = gauge("config_errors", "Policy file errors in force (the daemon runs on with the last good policy or none for those links).").gauge()
	m.pauseEnd = gauge("pause_end_timestamp_seconds", "Unix time a pause of the shaping ends (macake pause), per paused link; link=\"*\" is a pause of every link. No series while nothing is paused; the time left is this minus time().", "link")
	gauge("build_info", "Always 1; the labels say which macake is running.", "version", "commit", "goversion").
		gauge(opts.Version, opts.Commit, runtime.Version()).Set(1)
	m.shapers = newShaperCollector()
	return m
}

// WriteText writes every metric in the Prometheus text format (0.0.4):
// what a scrape of /metrics gets.
func (m *Metrics) WriteText(w io.Writer) error {
	type writer struct {
		name  string
		write func(*expo)
	}
	ws := []writer{{"go_", writeGo}, {"process_", writeProcess}, {Namespace + "_shaper_", m.shapers.write}}
	for _, f := range m.families {
		ws = append(ws, writer{f.name, f.write})
	}
	slices.SortStableFunc(ws, func(a, b writer) int { return strings.Compare(a.name, b.name) })
	e := &expo{w: bufio.NewWriter(w)}
	for _, x := range ws {
		x.write(e)
	}
	return e.w.Flush()
}

// Reconciled counts one reconcile: result failed when err is not nil,
// no_changes when changes is 0, applied otherwise; observes its duration;
// and, unless it failed, stamps the last-success time.
func (m *Metrics) Reconciled(changes int, took time.Duration, err error) {
	switch {
	case err != nil:
		m.reconciles[2].Inc()
	case changes == 0:
		m.reconciles[0].Inc()
	default:
		m.reconciles[1].Inc()
	}
	m.reconcileDuration.Observe(took.Seconds())
	if err == nil {
		m.lastSuccess.Set(float64(m.now().UnixMilli()) / 1e3)
	}
}

// DriftRepaired counts one repair of drift of the given kind (the
// logging.Drift* kinds: rules_missing, shaper_changed, ...). Label values
// are kept forever, so pass only those few words.
func (m *Metrics) DriftRepaired(kind string) { m.driftRepairs.counter(kind).Inc() }

// LinkChanged counts one change of the policy matching an interface.
func (m *Metrics) LinkChanged() { m.linkChanges.Inc() }

// SetPauses replaces the pauses in force: each paused link ("*": every
// link) with when its pause ends.
func (m *Metrics) SetPauses(ends map[string]time.Time) {
	m.pauseEnd.deleteAll()
	for link, end := range ends {
		m.pauseEnd.gauge(link).Set(float64(end.UnixNano()) / 1e9)
	}
}

// SetConfigErrors sets how many policy file errors are in force.
func (m *Metrics) SetConfigErrors(n int) { m.configErrors.Set(float64(n)) }

// Link returns the handle of the named link, creating its series on first
// use: its directions' gauges at 0, its controller state "running", its
// shaper engaged. Calling it again returns the same handle.
func (m *Metrics) Link(name string) *Link {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.links[name]; ok {
		return l
	}
	l := &Link{m: m, name: name, states: map[string]Gauge{}, reflectors: map[netip.Addr]*Reflector{}}
	for _, d := range shape.Directions {
		ls := []string{name, d.String()}
		l.dirs[d] = Direction{
			rate:     m.shaperRate.gauge(ls...),
			min:      m.rateMin.gauge(ls...),
			max:      m.rateMax.gauge(ls...),
			achieved: m.achieved.gauge(ls...),
			load:     m.load.gauge(ls...),
			baseline: m.baseline.gauge(ls...),
			delta:    m.delta.gauge(ls...),
			window:   m.window.gauge(ls...),
			bloat:    m.bloat.gauge(ls...),
			cuts:     m.rateChanges.counter(name, d.String(), "cut"),
			lowers:   m.rateChanges.counter(name, d.String(), "lower"),
			raises:   m.rateChanges.counter(name, d.String(), "raise"),
		}
		l.dirs[d].SetDelayUnknown()
	}
	for _, s := range States {
		l.states[s] = m.state.gauge(name, s)
	}
	l.current = States[0]
	l.states[l.current].Set(1)
	l.engaged = m.engaged.gauge(name)
	l.engaged.Set(1)
	l.rtt = m.probeRTT.histogram(name)
	m.links[name] = l
	return l
}

// RemoveLink deletes every series of the named link, so a link that is no
// longer active leaves no stale values behind. Handles to it stay safe to
// use but update nothing that is scraped; call Link again if it comes back.
func (m *Metrics) RemoveLink(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.links[name]; ok {
		l.mu.Lock()
		l.removed = true
		l.mu.Unlock()
	}
	delete(m.links, name)
	for _, f := range m.linkFamilies {
		f.deleteWhere("link", name)
	}
	m.shapers.removeLink(name)
}

// Link is one active link's metrics.
type Link struct {
	m       *Metrics
	name    string
	dirs    [2]Direction
	engaged Gauge
	rtt     Histogram

	mu         sync.Mutex
	states     map[string]Gauge
	current    string
	reflectors map[netip.Addr]*Reflector
	// removed is set by RemoveLink: the handle must not create series
	// again.
	removed bool
}

// Direction returns the handle of one direction of the link.
func (l *Link) Direction(d shape.Direction) *Direction {
	if d == shape.Upload {
		return &l.dirs[shape.Upload]
	}
	return &l.dirs[shape.Download]
}

// SetState sets the controller's state, one of States (another word gets
// a series of its own). Only a change touches the series.
func (l *Link) SetState(state string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == l.current {
		return
	}
	g, ok := l.states[state]
	if !ok {
		g = Gauge{detached(nil)}
		if !l.removed {
			g = l.m.state.gauge(l.name, state)
		}
		l.states[state] = g
	}
	l.states[l.current].Set(0)
	g.Set(1)
	l.current = state
}

// SetEngaged says whether the link's shaper is installed (balanced mode
// releases it while the link is clean).
func (l *Link) SetEngaged(engaged bool) {
	if engaged {
		l.engaged.Set(1)
	} else {
		l.engaged.Set(0)
	}
}

// Reflector returns the handle for one of the link's reflectors, creating
// its series on first use.
func (l *Link) Reflector(addr netip.Addr) *Reflector {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.reflectors[addr]; ok {
		return r
	}
	if l.removed {
		// Updates to a removed link's handles go nowhere.
		return &Reflector{samples: Counter{detached(nil)}, lost: Counter{detached(nil)}, rtt: Histogram{detached(rttBuckets)}}
	}
	s := addr.String()
	r := &Reflector{
		samples: l.m.probeSamples.counter(l.name, s),
		lost:    l.m.probeLost.counter(l.name, s),
		rtt:     l.rtt,
	}
	l.reflectors[addr] = r
	return r
}

// RemoveReflector deletes a replaced reflector's series.
func (l *Link) RemoveReflector(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.reflectors, addr)
	s := addr.String()
	l.m.probeSamples.delete(l.name, s)
	l.m.probeLost.delete(l.name, s)
}

// Direction is one shaped direction of a link. Its setters are the hot
// path: each is one atomic store.
type Direction struct {
	rate, min, max, achieved, load Gauge
	baseline, delta, window, bloat Gauge
	cuts, lowers, raises           Counter
}

// SetShaperRate sets the rate the shaper has, in bit/s (0 when none is
// installed). RateChanged does this too.
func (d *Direction) SetShaperRate(bits int64) { d.rate.Set(float64(bits)) }

// SetRateBounds sets the policy's minimum and maximum rates, in bit/s.
func (d *Direction) SetRateBounds(minBits, maxBits int64) {
	d.min.Set(float64(minBits))
	d.max.Set(float64(maxBits))
}

// RateChanged records a rate the controller set on the shaper: it counts
// a cut when toBits is lower and cut says the reason was bufferbloat (the
// log's event=cut), a lowering when lower for another reason (decay toward
// base, the minimum on sleep), a raise when higher, and sets the shaper
// rate to toBits.
func (d *Direction) RateChanged(fromBits, toBits int64, cut bool) {
	switch {
	case toBits < fromBits && cut:
		d.cuts.Inc()
	case toBits < fromBits:
		d.lowers.Inc()
	case toBits > fromBits:
		d.raises.Inc()
	}
	d.rate.Set(float64(toBits))
}

// SetAchievedRate sets the rate the interface carried over the last
// counter sample, in bit/s.
func (d *Direction) SetAchievedRate(bits int64) { d.achieved.Set(float64(bits)) }

// SetLoad sets achieved rate / shaper rate.
func (d *Direction) SetLoad(ratio float64) { d.load.Set(ratio) }

// SetDelay sets the one-way idle baseline and the current delay above it.
func (d *Direction) SetDelay(baseline, delta time.Duration) {
	d.baseline.Set(baseline.Seconds())
	d.delta.Set(delta.Seconds())
}

// SetDelayUnknown marks the baseline and the delay as not measured (NaN,
// which graphs show as a gap): before a controller's first reply its
// baseline is a starting value, and a link that never got a reply must
// not show one as its idle delay.
func (d *Direction) SetDelayUnknown() {
	d.baseline.Set(math.NaN())
	d.delta.Set(math.NaN())
	d.window.Set(math.NaN())
}

// SetWindowDelay sets the mean delay above the baseline over the
// bufferbloat window.
func (d *Direction) SetWindowDelay(delay time.Duration) { d.window.Set(delay.Seconds()) }

// SetBufferbloatSamples sets how many samples in the detection window are
// delayed.
func (d *Direction) SetBufferbloatSamples(n int) { d.bloat.Set(float64(n)) }

// Reflector is one reflector of a link.
type Reflector struct {
	samples, lost Counter
	rtt           Histogram
}

// Sample records a reply with its round-trip time.
func (r *Reflector) Sample(rtt time.Duration) {
	r.samples.Inc()
	r.rtt.Observe(rtt.Seconds())
}

// Lost records a probe that got no reply in time.
func (r *Reflector) Lost() { r.lost.Inc() }
