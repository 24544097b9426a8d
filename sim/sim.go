// SPDX-License-Identifier: Apache-2.0

// Package sim is macake's link simulator and benchmark harness: a
// deterministic, packet-level replay of a bloated bottleneck (capacity from
// a trace, a deep drop-tail FIFO) with TCP flows in both directions, the
// macOS dummynet pipes in front, a controller in the loop fed only what the
// daemon sees, and an independent measurement probe that sees what a user
// feels. ../shared/reference/benchmark.md §4 and §6 define the protocol,
// the metrics and the score that Run reports.
//
// Topology, per direction (the Mac is the client):
//
//	upload:   client ─► upload pipe ─► tx counter ─► bottleneck ─► path ─► far end
//	download: far end ─► path ─► bottleneck ─► rx counter ─► download pipe ─► client
//
// The controller's probes skip both pipes (macake exempts them in pf) but
// cross both bottlenecks; the measurement probe crosses everything. Time is
// virtual (ns), so a run is a pure function of its inputs and seed.
package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/macake/macake/controller/autoqueue"
	"github.com/macake/macake/score"
	"github.com/macake/macake/shape"
)

// Options describe one run. Zero values take the defaults of
// benchmark.md §6.
type Options struct {
	// Duration of the run (default 60 s).
	Duration time.Duration
	// Flows is the number of bulk TCP flows per direction, indexed by
	// shape.Direction (default 4 each, RRUL-like).
	Flows [2]int
	// CC is the senders' congestion control (default CUBIC).
	CC CC
	// Buffer is the bottleneck FIFO's size in seconds of the direction's
	// mean capacity (default: the link's own, else 1 s).
	Buffer time.Duration
	// Seed selects the randomness: reflector jitter, probe loss, flow
	// start times (and a built-in model's link, which is built before).
	Seed uint64
	// Offset is where in the trace the run starts.
	Offset time.Duration
	// ActuationDelay is the time between a controller's decision and the
	// pipe running at the new rate (fork/exec of dnctl; default 10 ms).
	ActuationDelay time.Duration
	// Queue sizes the pipes' byte queues at every rate change.
	Queue QueueRule
	// IdleRTT, when set, is the idle RTT the queue rule sizes from
	// instead of the path's smallest base RTT: a daemon that never
	// measured the link sizes `queue = "auto"` from its default.
	IdleRTT time.Duration
	// Reflectors is the number of probe targets (default 6), each probed
	// every ProbeInterval (default 300 ms), round robin: by default one
	// probe every 50 ms, as cake-autorate sends them (ProbeBurst sends as
	// watch's prober does).
	Reflectors    int
	ProbeInterval time.Duration
	// ProbeBurst is how many probes go out at once, every ProbeBurst ×
	// ProbeInterval / Reflectors: 0 or 1 one at a time (cake-autorate),
	// 2 as watch's prober sends six reflectors' (probe.Pace), Reflectors
	// the rounds watch's prober sent until they made the kernel testbed
	// disagree with its twin (docs/MEASUREMENTS.md, "Probe rounds").
	ProbeBurst int
	// ProbeOWD makes the prober use ICMP timestamps, so samples carry
	// one-way delays.
	ProbeOWD bool
	// ReflectorClock is the largest offset of a reflector's clock, which
	// ICMP timestamps carry (default 5 s; negative: none, as for
	// reflectors on the same host's clock).
	ReflectorClock time.Duration
	// ReflectorSpread is the largest extra RTT of a reflector behind the
	// path (each gets a fixed share, default 5 ms); ReflectorJitter the
	// mean extra delay of one reply (default 0.5 ms); ProbeLoss the share
	// of probes that never get a reply (default 0.5 %; negative: none);
	// ReflectorSpikes the share of replies delayed by 5–30 ms on a slow
	// path (default 1 %; negative: none). A testbed's reflectors next to
	// the path have neither loss nor spikes.
	ReflectorSpread time.Duration
	ReflectorJitter time.Duration
	ProbeLoss       float64
	ReflectorSpikes float64
	// Shaper is how the pipes drop (default dummynet's, as on a Mac).
	Shaper ShaperKind
	// FlowStart delays the bulk flows: the controller runs on an idle
	// link first, as `macake watch` does before a testbed's load starts.
	FlowStart time.Duration
	// MeasureInterval is the period of the measurement probe (default
	// 10 ms, 100 Hz).
	MeasureInterval time.Duration
	// CallInterval is the period of the interactive call: a VoIP-like
	// stream of CallBytes packets each way, through the pipes like any
	// of the user's traffic (default 20 ms, 50 packets a second;
	// negative: no call).
	CallInterval time.Duration
	// LostDelay is the delay a lost measurement probe or call packet
	// counts as in the percentiles and the score (default
	// score.DefaultLostDelay, 1 s).
	LostDelay time.Duration
	// LoadInterval is the period of the interface-counter samples (default
	// 200 ms).
	LoadInterval time.Duration
	// TickInterval is the period of Controller.Tick (default 10 ms).
	TickInterval time.Duration
	// Warmup is excluded from the metrics (default 2 s): slow start, and
	// the controller's first decisions.
	Warmup time.Duration
	// RwndBytes is each receiver's window (default 4 MiB).
	RwndBytes int
	// Series keeps per-100-ms time series in the result, for plots.
	Series bool
	// Bounds, when set for a direction (Max > 0), replace the min/base/max
	// derived from the trace (e.g. from a policy file).
	Bounds [2]Bounds
	// Phases, when set, runs the controller only between Phases[0] and
	// Phases[1]: unshaped before and after (drift-controlled off/on/off).
	Phases [2]time.Duration
}

func (o Options) withDefaults() Options {
	if o.Duration <= 0 {
		o.Duration = 60 * time.Second
	}
	if o.Buffer <= 0 {
		o.Buffer = time.Second
	}
	if o.Queue == (QueueRule{}) {
		o.Queue = DefaultQueue
	}
	if o.ActuationDelay < 0 {
		o.ActuationDelay = 0
	} else if o.ActuationDelay == 0 {
		o.ActuationDelay = 10 * time.Millisecond
	}
	if o.Reflectors <= 0 {
		o.Reflectors = DefaultReflectors
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 300 * time.Millisecond
	}
	if o.ReflectorSpread == 0 {
		o.ReflectorSpread = 5 * time.Millisecond
	}
	if o.ReflectorJitter == 0 {
		o.ReflectorJitter = 500 * time.Microsecond
	}
	switch {
	case o.ProbeLoss == 0:
		o.ProbeLoss = 0.005
	case o.ProbeLoss < 0:
		o.ProbeLoss = 0
	}
	switch {
	case o.ReflectorSpikes == 0:
		o.ReflectorSpikes = 0.01
	case o.ReflectorSpikes < 0:
		o.ReflectorSpikes = 0
	}
	if o.MeasureInterval <= 0 {
		o.MeasureInterval = 10 * time.Millisecond
	}
	if o.CallInterval == 0 {
		o.CallInterval = DefaultCallInterval
	}
	o.LostDelay = score.LostOrDefault(o.LostDelay)
	if o.LoadInterval <= 0 {
		o.LoadInterval = 200 * time.Millisecond
	}
	if o.TickInterval <= 0 {
		o.TickInterval = 10 * time.Millisecond
	}
	if o.Warmup == 0 {
		o.Warmup = 2 * time.Second
	}
	if o.RwndBytes <= 0 {
		o.RwndBytes = 4 << 20
	}
	return o
}

// DefaultCallInterval is the call's packet period when Options gives none:
// 20 ms of audio a packet, 50 packets a second each way.
const DefaultCallInterval = 20 * time.Millisecond

// MinMeasured is the shortest stretch a run may measure after its
// warm-up: 200 samples of the 100 Hz probe and 20 bins of capacity, below
// which the percentiles and U describe noise (and a bin cut short by the
// end of the run would weigh as much as the rest).
const MinMeasured = 2 * time.Second

// DefaultReflectors is the number of probe targets when Options gives
// none: six, as cake-autorate and watch probe by default.
const DefaultReflectors = 6

// MinBuffer is the smallest bottleneck buffer a run accepts, in time at the
// mean capacity: below it the FIFO holds a packet or two at most rates and
// measures the buffer, not the controllers.
const MinBuffer = 10 * time.Millisecond

// Validate reports options no run can use. Negative durations are
// rejected, except ActuationDelay, whose negative value means "none".
func (o Options) Validate() error {
	var errs []error
	for _, v := range []struct {
		name string
		d    time.Duration
	}{
		{"duration", o.Duration}, {"buffer", o.Buffer}, {"offset", o.Offset}, {"warm-up", o.Warmup},
		{"probe interval", o.ProbeInterval}, {"reflector spread", o.ReflectorSpread},
		{"reflector jitter", o.ReflectorJitter}, {"measure interval", o.MeasureInterval},
		{"load interval", o.LoadInterval}, {"tick interval", o.TickInterval}, {"flow start", o.FlowStart}, {"idle RTT", o.IdleRTT},
		{"lost delay", o.LostDelay},
	} {
		if v.d < 0 {
			errs = append(errs, fmt.Errorf("%s %v: want zero (the default) or more", v.name, v.d))
		}
	}
	if o.ProbeBurst < 0 || o.ProbeBurst > o.withDefaults().Reflectors {
		errs = append(errs, fmt.Errorf("probe burst %d: want 0 to the number of reflectors", o.ProbeBurst))
	}
	if o.Reflectors < 0 || o.Reflectors > 64 {
		errs = append(errs, fmt.Errorf("reflectors %d: want 1–64 (0: the default %d)", o.Reflectors, DefaultReflectors))
	}
	if o.RwndBytes < 0 {
		errs = append(errs, fmt.Errorf("receive window %d bytes: want zero (the default) or more", o.RwndBytes))
	}
	if errs != nil {
		return errors.Join(errs...)
	}
	o = o.withDefaults()
	if o.Duration > 24*time.Hour {
		errs = append(errs, fmt.Errorf("duration %v is longer than a day", o.Duration))
	}
	if o.Offset > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("offset %v is more than a week into the trace", o.Offset))
	}
	for _, d := range shape.Directions {
		if o.Flows[d] < 0 || o.Flows[d] > 256 {
			errs = append(errs, fmt.Errorf("%s flows %d: want 0–256", d, o.Flows[d]))
		}
	}
	if o.Flows == [2]int{} {
		errs = append(errs, errors.New("no bulk flow in either direction: U and the score are measured under load; want at least one"))
	}
	if o.Buffer > time.Minute || o.Buffer < MinBuffer {
		errs = append(errs, fmt.Errorf("buffer %v: want %v to a minute of mean capacity", o.Buffer, MinBuffer))
	}
	// The engine steps in 1 ms ticks; a shorter period would fire more
	// than once per tick (a probe period below a tick, forever).
	for _, v := range []struct {
		name string
		d    time.Duration
	}{
		{"probe spacing (probe interval / reflectors)", o.ProbeInterval / time.Duration(o.Reflectors)},
		{"measure interval", o.MeasureInterval}, {"load interval", o.LoadInterval}, {"tick interval", o.TickInterval},
		{"call interval", max(o.CallInterval, time.Millisecond)},
	} {
		if v.d < time.Millisecond {
			errs = append(errs, fmt.Errorf("%s %v: want at least 1ms, the simulator's tick", v.name, v.d))
		}
	}
	if o.LostDelay > time.Minute {
		errs = append(errs, fmt.Errorf("lost delay %v: want at most a minute", o.LostDelay))
	}
	if o.ActuationDelay > 10*time.Second {
		errs = append(errs, fmt.Errorf("actuation delay %v: want at most 10 s", o.ActuationDelay))
	}
	if o.ProbeLoss >= 1 {
		errs = append(errs, fmt.Errorf("probe loss %v: want a probability below 1", o.ProbeLoss))
	}
	if o.ReflectorSpikes >= 1 {
		errs = append(errs, fmt.Errorf("reflector spikes %v: want a probability below 1", o.ReflectorSpikes))
	}
	if o.Shaper > ShaperHTB {
		errs = append(errs, fmt.Errorf("shaper %d: want dummynet or htb", o.Shaper))
	}
	if o.FlowStart >= o.Duration-o.Warmup && o.FlowStart > 0 {
		errs = append(errs, fmt.Errorf("flow start %v leaves nothing loaded in a run of %v", o.FlowStart, o.Duration))
	}
	if o.Warmup >= o.Duration {
		errs = append(errs, fmt.Errorf("warm-up %v is not shorter than the run (%v)", o.Warmup, o.Duration))
	} else if o.Duration-o.Warmup < MinMeasured {
		errs = append(errs, fmt.Errorf("run %v with a warm-up of %v measures only %v; want at least %v after the warm-up", o.Duration, o.Warmup, o.Duration-o.Warmup, MinMeasured))
	}
	for _, d := range shape.Directions {
		if b := o.Bounds[d]; b.Max > 0 && (b.Min <= 0 || b.Min > b.Base || b.Base > b.Max) {
			errs = append(errs, fmt.Errorf("%s bounds %d/%d/%d bit/s: want 0 < min ≤ base ≤ max", d, b.Min, b.Base, b.Max))
		}
	}
	if o.Phases[1] != 0 && (o.Phases[0] < 0 || o.Phases[1] <= o.Phases[0] || o.Phases[1] > o.Duration) {
		errs = append(errs, fmt.Errorf("phases %v: want 0 ≤ start < end ≤ duration", o.Phases))
	}
	return errors.Join(errs...)
}

const binWidth = 100 * time.Millisecond

// achievedEvery is the period of the engine's own achieved rates
// (QueueRule.Achieved): the controller's load interval.
const achievedEvery = 200 * time.Millisecond

// ShaperKind is the client's shaper the pipes model.
type ShaperKind uint8

// The shapers: dummynet's pipe (macOS) and Linux's htb class with a bfifo
// leaf (the tc backend without CAKE, and the e2e testbed). They differ in
// the drop test, which decides what a full queue does with small packets:
// dummynet drops every packet once the queue holds more than its limit,
// bfifo drops only a packet that would not fit, so a probe still fits
// where a full-sized segment does not.
const (
	ShaperDummynet ShaperKind = iota
	ShaperHTB
)

// String returns the name ParseShaper reads.
func (k ShaperKind) String() string {
	if k == ShaperHTB {
		return "htb"
	}
	return "dummynet"
}

// ParseShaper reads "dummynet" (or "") and "htb".
func ParseShaper(s string) (ShaperKind, error) {
	switch s {
	case "", "dummynet":
		return ShaperDummynet, nil
	case "htb":
		return ShaperHTB, nil
	}
	return 0, fmt.Errorf("shaper %q: want dummynet (macOS) or htb (Linux htb + bfifo)", s)
}

// pipe is a dummynet pipe as macOS runs it: a byte-limited drop-tail FIFO
// served at a rate in 1 ms ticks (the kernel's dummynet timer), with credit
// that accrues only while packets wait and is zeroed by every reconfigure.
// With bfifo set it drops as Linux's bfifo does instead, and counts each
// packet's framing in its queue and its rate as htb and bfifo do.
type pipe struct {
	rate    int64 // bit/s; 0 = no pipe (packets pass)
	limit   int64 // queue limit in bytes
	bfifo   bool
	framing int64 // bytes counted per packet beyond its IP length
	q       ring[packet]
	bytes   int64
	credit  int64 // bit·ms

	drops     int64
	dropBytes int64
	passed    int64 // packets served

	// QueueRule.Adapt's state: the size's scale, the counters at the last
	// look and the looks since the last drop.
	scale                 float64
	lastDrops, lastPassed int64
	quiet                 int

	// red is QueueRule.RED's gentle RED, as the kernel computes it.
	red *gred
}

// enqueue applies the drop test to a packet arriving at now and queues
// it: dummynet's (the queue is full when its byte length already exceeds
// the limit, then gred's early drop when the rule has it) or bfifo's (the
// packet does not fit under the limit).
func (p *pipe) enqueue(pk packet, now int64) bool {
	size := p.len(pk)
	full := p.bytes > p.limit
	if p.bfifo {
		full = p.bytes+size > p.limit
	}
	if p.red != nil && !full && p.red.configure(p.limit) {
		full = p.red.drop(p.bytes, size, now)
	}
	if full {
		p.drops++
		p.dropBytes += size
		return false
	}
	p.q.push(pk)
	p.bytes += size
	return true
}

// len is what the pipe counts for pk, in bytes.
func (p *pipe) len(pk packet) int64 { return int64(pk.size) + p.framing }

// bottleneck is the ISP's queue: a deep drop-tail FIFO in bytes, served by
// the trace's delivery opportunities (each up to 1500 bytes; a packet may
// be served across several; unused bytes are lost).
type bottleneck struct {
	sched *schedule
	q     ring[packet]
	bytes int64
	limit int64
	next  int64 // time of the next service, or never when empty
	loss  float64
	rng   *rand.Rand

	drops     int64
	dropBytes int64
	lost      int64
}

const never = math.MaxInt64

type timedPacket struct {
	at int64
	p  packet
}

// delayLine is the propagation delay of one direction: FIFO (a change of
// the path delay never reorders packets).
type delayLine struct {
	q    ring[timedPacket]
	last int64
}

func (l *delayLine) push(p packet, at int64) {
	if at < l.last {
		at = l.last
	}
	l.last = at
	l.q.push(timedPacket{at, p})
}

func (l *delayLine) next() int64 {
	if l.q.len() == 0 {
		return never
	}
	return l.q.front().at
}

type flow struct {
	dir     shape.Direction // direction of the data
	snd     *sender
	rcv     receiver
	startAt int64
	started bool
}

type actuation struct {
	at   int64
	dir  shape.Direction
	rate int64
}

// engine is one run's state.
type engine struct {
	opt  Options
	link *Link
	env  *Env
	ctrl Controller
	imm  bool

	now, end int64

	pipes [2]pipe
	bns   [2]bottleneck
	props [2]delayLine
	flows []*flow

	// reflector replies waiting for their jitter, in time order
	replies      []timedPacket
	reflOffset   []int64
	reflClockOff []int64
	rngRefl      *rand.Rand
	rngLoss      *rand.Rand

	acts ring[actuation]

	rxBytes, txBytes     uint64
	rxPackets, txPackets uint64
	pauser               ProbePauser
	loadEvery            int64

	nextTick, nextProbe, nextMeasure, nextLoad, nextCtrlTick, nextCall int64
	probeSeq                                                           int32
	callSeq                                                            [2]int32
	controlOn, starting                                                bool

	owdUntil int64
	owdNow   int64

	// achieved is each direction's rate over the last achievedEvery, as
	// the interface counters show it (download before the pipe, upload
	// after it): what QueueRule.Achieved sizes from.
	achieved [2]int64
	achBytes [2]uint64
	achSince int64

	rec *recorder
}

// Run simulates one controller on one link.
func Run(link *Link, opt Options, factory Factory) (*Result, error) {
	if err := link.Validate(); err != nil {
		return nil, err
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if opt.Buffer <= 0 {
		opt.Buffer = link.Buffer
	}
	opt = opt.withDefaults()
	env := NewEnv(link, opt)
	ctrl, err := factory(env)
	if err != nil {
		return nil, err
	}
	e := newEngine(link, opt, env, ctrl)
	e.run()
	return e.rec.result(e), nil
}

// NewEnv describes a link to controller factories, for a run with opt.
func NewEnv(link *Link, opt Options) *Env {
	opt = opt.withDefaults()
	env := &Env{Link: link, IdleRTT: link.MinRTT(), Seed: opt.Seed}
	if opt.IdleRTT > 0 {
		env.IdleRTT = opt.IdleRTT
	}
	var bins [2][]int64
	for _, d := range shape.Directions {
		tr := link.Capacity[d]
		env.Mean[d] = link.Mean(d)
		env.P5[d] = tr.ActivePercentile(5)
		min := floorRate(env.P5[d])
		base := max(floorRate(tr.ActivePercentile(25)), min)
		env.Bounds[d] = Bounds{Min: min, Base: base, Max: max(floorRate(tr.ActivePercentile(95)), base)}
		if b := link.Bounds[d]; b.Max > 0 {
			env.Bounds[d] = b
		}
		if b := opt.Bounds[d]; b.Max > 0 {
			env.Bounds[d] = b
		}
		bins[d] = capacityBins(tr, opt.Offset, opt.Duration, binWidth)
	}
	env.Capacity = func(d shape.Direction, t time.Duration) int64 {
		b := bins[d]
		i := int(t / binWidth)
		if i < 0 {
			i = 0
		}
		if i >= len(b) {
			i = len(b) - 1
		}
		return b[i] * int64(time.Second/binWidth)
	}
	return env
}

func newEngine(link *Link, opt Options, env *Env, ctrl Controller) *engine {
	e := &engine{opt: opt, link: link, env: env, ctrl: ctrl, end: int64(opt.Duration)}
	if im, ok := ctrl.(immediate); ok {
		e.imm = im.immediateActuation()
	}
	for _, d := range shape.Directions {
		if opt.Shaper == ShaperHTB {
			e.pipes[d].bfifo, e.pipes[d].framing = true, ethernetFraming
		}
		if opt.Queue.RED {
			e.pipes[d].red = &gred{rng: NewStream(opt.Seed, streamRED+uint64(d)*16)}
		}
		mean := link.Mean(d)
		limit := int64(mean / 8 * opt.Buffer.Seconds())
		if b := link.BufferBytes[d]; b > 0 {
			limit = b
		}
		e.bns[d] = bottleneck{
			sched: newSchedule(link.Capacity[d], opt.Offset),
			limit: max(limit, 2*dataBytes),
			next:  never,
			loss:  link.Loss[d],
			rng:   NewStream(opt.Seed, streamBottleneckLoss+uint64(d)*16),
		}
	}
	rf := NewStream(opt.Seed, streamFlows)
	for _, d := range shape.Directions {
		for range opt.Flows[d] {
			e.flows = append(e.flows, &flow{
				dir:     d,
				snd:     newSender(opt.CC, opt.RwndBytes),
				startAt: int64(opt.FlowStart) + int64(Uniform(rf, 0, float64(50*time.Millisecond))),
			})
		}
	}
	cfg := NewStream(opt.Seed, streamLink)
	for range opt.Reflectors {
		e.reflOffset = append(e.reflOffset, int64(Uniform(cfg, 0, float64(opt.ReflectorSpread))))
		off := int64(Uniform(cfg, -5000, 5000)) * int64(time.Millisecond)
		switch {
		case opt.ReflectorClock < 0:
			off = 0
		case opt.ReflectorClock > 0:
			off = off * int64(opt.ReflectorClock) / int64(5*time.Second)
		}
		e.reflClockOff = append(e.reflClockOff, off)
	}
	e.rngRefl = NewStream(opt.Seed, streamReflector)
	e.rngLoss = NewStream(opt.Seed, streamProbeLoss)
	e.rec = newRecorder(e)
	e.nextProbe = int64(Uniform(cfg, 0, float64(opt.ProbeInterval)/float64(opt.Reflectors)))
	e.nextMeasure = int64(Uniform(cfg, 0, float64(opt.MeasureInterval)))
	e.nextCall = never
	if opt.CallInterval > 0 {
		e.nextCall = int64(Uniform(cfg, 0, float64(opt.CallInterval)))
	}
	e.loadEvery = int64(opt.LoadInterval)
	e.nextLoad = e.loadEvery
	return e
}

func (e *engine) run() {
	e.controlOn = e.opt.Phases[1] == 0
	if e.controlOn {
		e.start()
	}
	for e.step() {
	}
	e.now = e.end
}

// step processes the next event; it returns false at the end of the run.
func (e *engine) step() bool {
	t, src := e.nextTick, 0
	if x := e.bns[shape.Upload].next; x < t {
		t, src = x, 1
	}
	if x := e.props[shape.Upload].next(); x < t {
		t, src = x, 2
	}
	if x := e.bns[shape.Download].next; x < t {
		t, src = x, 3
	}
	if x := e.props[shape.Download].next(); x < t {
		t, src = x, 4
	}
	if len(e.replies) > 0 && e.replies[0].at < t {
		t, src = e.replies[0].at, 5
	}
	if t >= e.end {
		return false
	}
	e.now = t
	switch src {
	case 0:
		e.tick()
		e.nextTick += int64(time.Millisecond)
	case 1:
		e.serveBottleneck(shape.Upload)
	case 2:
		p := e.props[shape.Upload].q.pop().p
		e.atFar(p)
	case 3:
		e.serveBottleneck(shape.Download)
	case 4:
		p := e.props[shape.Download].q.pop().p
		e.enqueueBottleneck(shape.Download, p)
	case 5:
		p := e.replies[0].p
		copy(e.replies, e.replies[1:])
		e.replies = e.replies[:len(e.replies)-1]
		e.fromFar(p)
	}
	return true
}

// owd is the one-way propagation delay now (half the base RTT).
func (e *engine) owd() int64 {
	if e.now >= e.owdUntil || e.now < e.owdUntil-int64(time.Second) {
		e.owdNow = int64(e.link.RTTAt(time.Duration(e.now))) / 2
		e.owdUntil = e.now + int64(time.Millisecond)
	}
	return e.owdNow
}

// fromClient sends a packet from the Mac: through the upload pipe unless it
// is an exempt controller probe.
func (e *engine) fromClient(p packet) {
	if bypass, _ := e.intoClientPipe(shape.Upload, p); bypass {
		e.toUploadBottleneck(p)
	}
}

// intoClientPipe puts p into the client's pipe of direction d. bypass is
// true when p goes around the pipe (an exempt controller probe, or the
// direction unshaped), for the caller to send on; dropped when the full
// pipe dropped it (recorded as dropped).
func (e *engine) intoClientPipe(d shape.Direction, p packet) (bypass, dropped bool) {
	pp := &e.pipes[d]
	if p.kind == kindProbe || pp.rate == 0 {
		return true, false
	}
	if !pp.enqueue(p, e.now) {
		e.rec.dropped(d, p)
		return false, true
	}
	return false, false
}

func (e *engine) toUploadBottleneck(p packet) {
	e.txBytes += uint64(p.size)
	e.txPackets++
	e.enqueueBottleneck(shape.Upload, p)
}

func (e *engine) enqueueBottleneck(d shape.Direction, p packet) {
	b := &e.bns[d]
	if b.loss > 0 && b.rng.Float64() < b.loss {
		b.lost++
		e.rec.dropped(d, p)
		return
	}
	if b.bytes+int64(p.size) > b.limit {
		b.drops++
		b.dropBytes += int64(p.size)
		e.rec.dropped(d, p)
		return
	}
	p.left = p.size
	b.q.push(p)
	b.bytes += int64(p.size)
	if b.q.len() == 1 {
		b.sched.seek(e.now)
		b.next = b.sched.next
	}
}

// serveBottleneck uses one delivery opportunity.
func (e *engine) serveBottleneck(d shape.Direction) {
	b := &e.bns[d]
	budget := int32(1500)
	for budget > 0 && b.q.len() > 0 {
		h := b.q.front()
		take := min(budget, h.left)
		h.left -= take
		budget -= take
		if h.left > 0 {
			break
		}
		p := b.q.pop()
		b.bytes -= int64(p.size)
		p.served = e.now
		e.afterBottleneck(d, p)
	}
	e.rec.served(d, e.now, 1500-budget)
	b.sched.advance()
	if b.q.len() > 0 {
		b.next = b.sched.next
	} else {
		b.next = never
	}
}

func (e *engine) afterBottleneck(d shape.Direction, p packet) {
	if d == shape.Upload {
		owd := e.owd()
		if p.kind == kindMeasure || p.kind == kindCall {
			p.base += owd
		}
		e.props[shape.Upload].push(p, e.now+owd)
		return
	}
	e.rxBytes += uint64(p.size)
	e.rxPackets++
	switch bypass, dropped := e.intoClientPipe(shape.Download, p); {
	case bypass:
		e.atClient(p)
	case dropped:
		e.rec.unserved(shape.Download, p)
	}
}

// fromFar sends a packet from the far end (servers, reflectors, the
// measurement echo) towards the Mac.
func (e *engine) fromFar(p packet) {
	owd := e.owd()
	if p.kind == kindMeasure || p.kind == kindCall {
		p.base += owd
	}
	e.props[shape.Download].push(p, e.now+owd)
}

func (e *engine) atFar(p packet) {
	if e.arrive(shape.Upload, p, e.fromFar) {
		return
	}
	switch p.kind {
	case kindProbe:
		if e.rngLoss.Float64() < e.opt.ProbeLoss {
			return
		}
		jitter := e.jitter()
		p.echo = e.now
		p.reply = true
		at := e.now + e.reflOffset[p.flow] + jitter
		e.insertReply(timedPacket{at, p})
	case kindMeasure:
		p.echo = e.now
		p.reply = true
		p.aux = e.now - p.sent - p.base
		e.rec.measureUp(p.sent, p.aux)
		p.base = 0
		e.fromFar(p)
	case kindCall:
		e.rec.callArrived(shape.Upload, p, e.now)
	}
}

// arrive records p's delivery at the end of direction d (the far end
// of an upload, the Mac for a download) and takes a flow's packet there: a
// segment is acknowledged when the receiver says so (the ack leaves
// through send, back the way it came), an ack moves the sender on. It
// reports whether p was a flow's packet, which needs nothing more.
func (e *engine) arrive(d shape.Direction, p packet, send func(packet)) bool {
	e.rec.deliver(d, e.now, p.size)
	switch p.kind {
	case kindData:
		f := e.flows[p.flow]
		if now, sack := f.rcv.onData(e.now, p.seq, p.sent); now {
			send(f.ackPacket(p.flow, sack))
		}
	case kindAck:
		f := e.flows[p.flow]
		f.snd.onAck(e.now, p.seq, p.sack, p.echo)
		e.transmit(f, p.flow)
	default:
		return false
	}
	return true
}

// jitter is one reply's extra delay at the reflector: usually a fraction of
// a millisecond, and for Options.ReflectorSpikes of replies (1 %) a spike
// of 5–30 ms (ICMP handled on a slow path).
func (e *engine) jitter() int64 {
	r := e.rngRefl
	j := float64(e.opt.ReflectorJitter) * (r.Float64() + r.Float64()) // mean = ReflectorJitter
	if r.Float64() < e.opt.ReflectorSpikes {
		j += Uniform(r, float64(5*time.Millisecond), float64(30*time.Millisecond))
	}
	return int64(j)
}

func (e *engine) insertReply(tp timedPacket) {
	i := len(e.replies)
	e.replies = append(e.replies, tp)
	for i > 0 && e.replies[i-1].at > tp.at {
		e.replies[i] = e.replies[i-1]
		i--
	}
	e.replies[i] = tp
}

func (e *engine) atClient(p packet) {
	if e.arrive(shape.Download, p, e.fromClient) {
		return
	}
	switch p.kind {
	case kindProbe:
		if !e.controlOn {
			return
		}
		s := DelaySample{
			Reflector: int(p.flow),
			Sent:      time.Duration(p.sent),
			At:        time.Duration(e.now),
			RTT:       time.Duration(e.now - p.sent),
		}
		if e.opt.ProbeOWD {
			// ICMP timestamps: milliseconds, with the reflector's clock off
			// by a constant.
			ms := int64(time.Millisecond)
			far := (p.echo + e.reflClockOff[p.flow]) / ms
			s.HasOWD = true
			s.UpOWD = time.Duration((far - p.sent/ms) * ms)
			s.DownOWD = time.Duration((e.now/ms - far) * ms)
		}
		e.ctrl.Delay(s)
	case kindMeasure:
		e.rec.measureDown(p, e.now)
	case kindCall:
		e.rec.callArrived(shape.Download, p, e.now)
	}
}

func (f *flow) ackPacket(idx int32, sack int32) packet {
	size := int32(ackBytes)
	if sack >= 0 {
		size = sackAckBytes
	}
	return packet{kind: kindAck, size: size, flow: idx, seq: f.rcv.rcvNxt, sack: sack, echo: f.rcv.lastEcho}
}

// transmit sends whatever the flow's window allows.
func (e *engine) transmit(f *flow, idx int32) {
	if !f.started {
		return
	}
	for {
		seq, ok := f.snd.next(e.now)
		if !ok {
			return
		}
		p := packet{kind: kindData, size: dataBytes, flow: idx, seq: seq, sack: -1, sent: e.now}
		if f.dir == shape.Upload {
			e.fromClient(p)
		} else {
			e.fromFar(p)
		}
	}
}

// tick is the 1 ms heartbeat: actuations, pipe service, timers, probes,
// counters and the controller's tick.
func (e *engine) tick() {
	for e.acts.len() > 0 && e.acts.front().at <= e.now {
		a := e.acts.pop()
		e.applyRate(a.dir, a.rate)
	}
	e.servePipe(shape.Upload)
	e.servePipe(shape.Download)

	for i, f := range e.flows {
		if !f.started {
			if e.now >= f.startAt {
				f.started = true
				e.transmit(f, int32(i))
			}
			continue
		}
		if f.rcv.ackAt != 0 && e.now >= f.rcv.ackAt {
			f.rcv.ackAt = 0
			f.rcv.pending = 0
			ack := f.ackPacket(int32(i), -1)
			if f.dir == shape.Upload {
				e.fromFar(ack)
			} else {
				e.fromClient(ack)
			}
		}
		if f.snd.rtoAt != 0 && e.now >= f.snd.rtoAt {
			if f.snd.sndNxt > f.snd.sndUna {
				f.snd.onTimeout(e.now)
				e.transmit(f, int32(i))
			} else {
				f.snd.rtoAt = 0
			}
		}
	}

	e.phaseSwitch()
	if e.controlOn {
		for e.now >= e.nextProbe {
			n := min(max(e.opt.ProbeBurst, 1), e.opt.Reflectors)
			if e.pauser == nil || !e.pauser.ProbesPaused() {
				for range n {
					e.sendProbe()
				}
			}
			e.nextProbe += int64(e.opt.ProbeInterval) * int64(n) / int64(e.opt.Reflectors)
		}
	}
	for e.now >= e.nextMeasure {
		e.fromClient(packet{kind: kindMeasure, size: probeBytes, seq: e.rec.measureSent(), sent: e.now})
		e.nextMeasure += int64(e.opt.MeasureInterval)
	}
	for e.now >= e.nextCall {
		e.sendCall()
		e.nextCall += int64(e.opt.CallInterval)
	}
	if d := e.now - e.achSince; d >= int64(achievedEvery) {
		for dir, b := range [2]uint64{shape.Download: e.rxBytes, shape.Upload: e.txBytes} {
			e.achieved[dir] = int64(b-e.achBytes[dir]) * 8 * int64(time.Second) / d
			e.achBytes[dir] = b
		}
		e.achSince = e.now
		if e.opt.Queue.Adapt > 0 {
			for _, dir := range shape.Directions {
				e.adaptQueue(dir)
			}
		}
	}
	if e.now >= e.nextLoad {
		if e.controlOn {
			e.ctrl.Load(LoadSample{At: time.Duration(e.now), RxBytes: e.rxBytes, TxBytes: e.txBytes, RxPackets: e.rxPackets, TxPackets: e.txPackets})
		}
		e.nextLoad += e.loadEvery
	}
	if e.now >= e.nextCtrlTick {
		if e.controlOn {
			e.ctrl.Tick(time.Duration(e.now))
		}
		e.nextCtrlTick += int64(e.opt.TickInterval)
	}
	e.rec.tick(e)
}

// phaseSwitch starts and stops the controller of an off/on/off run.
func (e *engine) phaseSwitch() {
	ph := e.opt.Phases
	if ph[1] == 0 {
		return
	}
	if !e.controlOn && e.now >= int64(ph[0]) && e.now < int64(ph[1]) {
		e.controlOn = true
		e.nextProbe, e.nextCtrlTick = e.now, e.now
		e.start()
	}
	if e.controlOn && e.now >= int64(ph[1]) {
		e.controlOn = false
		e.acts.reset()
		for _, d := range shape.Directions {
			e.applyRate(d, 0)
		}
	}
}

// sendCall sends one packet of the call each way: from the Mac through the
// upload pipe, and from the far end towards the download pipe.
func (e *engine) sendCall() {
	for _, d := range shape.Directions {
		e.callSeq[d]++
		p := packet{kind: kindCall, size: CallBytes, flow: int32(d), seq: e.callSeq[d], sent: e.now}
		if d == shape.Upload {
			e.fromClient(p)
		} else {
			e.fromFar(p)
		}
	}
}

func (e *engine) sendProbe() {
	e.probeSeq++
	refl := e.probeSeq % int32(e.opt.Reflectors)
	e.fromClient(packet{kind: kindProbe, size: probeBytes, flow: refl, seq: e.probeSeq, sent: e.now})
}

// servePipe releases what the pipe's credit allows this tick.
func (e *engine) servePipe(d shape.Direction) {
	p := &e.pipes[d]
	if p.q.len() == 0 {
		return
	}
	if p.rate == 0 { // shaping removed: queued packets leave at once
		for p.q.len() > 0 {
			e.pipeOut(d, p.q.pop())
		}
		p.bytes = 0
		return
	}
	p.credit += p.rate
	for p.q.len() > 0 {
		need := p.len(*p.q.front()) * 8000
		if p.credit < need {
			break
		}
		p.credit -= need
		pk := p.q.pop()
		p.bytes -= p.len(pk)
		p.passed++
		e.pipeOut(d, pk)
	}
	if p.q.len() == 0 {
		p.credit = 0
		if p.red != nil {
			p.red.emptied(e.now)
		}
	}
}

func (e *engine) pipeOut(d shape.Direction, p packet) {
	if d == shape.Upload {
		e.toUploadBottleneck(p)
	} else {
		e.atClient(p)
	}
}

// start starts the controller; the rates it sets while starting apply at
// once, as `macake apply` sets them before the daemon steers.
func (e *engine) start() {
	e.starting = true
	e.ctrl.Start(time.Duration(e.now), e)
	e.starting = false
	e.pauser, _ = e.ctrl.(ProbePauser)
	e.loadEvery = int64(e.opt.LoadInterval)
	if m, ok := e.ctrl.(Monitor); ok {
		if iv := m.MonitorInterval(); iv > 0 {
			e.loadEvery = int64(iv)
		}
	}
	e.nextLoad = e.now + e.loadEvery
}

// SetRate is how a controller changes a pipe: after the actuation delay.
func (e *engine) SetRate(d shape.Direction, rate int64) {
	if !e.controlOn {
		return
	}
	if e.imm || e.starting {
		e.applyRate(d, rate)
		return
	}
	e.acts.push(actuation{at: e.now + int64(e.opt.ActuationDelay), dir: d, rate: rate})
}

// applyRate reconfigures a pipe as `dnctl pipe N config bw NKbit/s queue
// NKbytes` does: whole kbit/s, a new queue limit, credit zeroed, queued
// packets kept.
func (e *engine) applyRate(d shape.Direction, rate int64) {
	if rate < 0 {
		rate = 0
	}
	if rate > 0 {
		rate = max(rate/1000, 1) * 1000
	}
	p := &e.pipes[d]
	if rate == p.rate {
		return
	}
	p.rate = rate
	p.credit = 0
	if rate > 0 {
		p.limit = e.queueSize(d)
	}
	e.rec.rateChanged(d, rate)
}

// reserve applies QueueRule.Reserve to a bfifo's limit, as Linux's auto
// queue does.
func (e *engine) reserve(p *pipe, limit int64) int64 {
	if !e.opt.Queue.Reserve || !p.bfifo {
		return limit
	}
	return autoqueue.SparseReserve(limit, dataBytes)
}

// queueSize is direction d's pipe queue at its rate, by the run's rule.
func (e *engine) queueSize(d shape.Direction) int64 {
	p := &e.pipes[d]
	return e.reserve(p, e.opt.Queue.SizeFor(p.rate, e.env.IdleRTT, QueueState{Flows: e.opt.Flows[d], Achieved: e.achieved[d], Scale: p.scale}))
}

// adaptQueue is QueueRule.Adapt's look at direction d's pipe every
// achievedEvery: grow the queue while it drops more than the share, shrink
// it after each second without a drop. The new size applies at once, as a
// daemon would reconfigure the pipe.
func (e *engine) adaptQueue(d shape.Direction) {
	p := &e.pipes[d]
	drops, passed := p.drops-p.lastDrops, p.passed-p.lastPassed
	p.lastDrops, p.lastPassed = p.drops, p.passed
	if p.scale < 1 {
		p.scale = 1
	}
	old := p.scale
	switch {
	case drops > 0 && float64(drops) > e.opt.Queue.Adapt*float64(drops+passed):
		p.scale, p.quiet = min(p.scale*1.5, 8), 0
	case drops == 0:
		if p.quiet++; p.quiet >= int(time.Second/achievedEvery) {
			p.scale, p.quiet = max(p.scale/1.25, 1), 0
		}
	default:
		p.quiet = 0
	}
	if p.scale != old && p.rate > 0 {
		p.limit = e.queueSize(d)
	}
}

var _ Actuator = (*engine)(nil)
