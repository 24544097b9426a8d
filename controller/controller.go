// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
)

// runState is upstream's three controller states (autorate.md §4.2).
type runState uint8

const (
	running runState = iota
	sleeping
	stalled
)

// Constants of the control law that upstream does not expose as tunables.
const (
	// initialBaseline is a fresh slot's baseline per direction (AR-04).
	initialBaseline = 100_000 // µs
	// rolloverGuard is the |δ_dl| + |δ_ul| that resets an ICMP-timestamp
	// slot's baselines (AR-05): 50 minutes.
	rolloverGuard = 3_000_000_000 // µs
	// MaxRTT is the largest round trip accepted in an RTTHalf sample;
	// anything longer is a broken probe, not a queue.
	MaxRTT = time.Minute
	// maxCounterStep is the largest byte-counter advance believed in one
	// sample (1 TiB); a bigger jump is treated as a counter reset.
	maxCounterStep = 1 << 40
	// wrapPlausibleFloorK is the lowest rate (kbit/s) accepted for a
	// counter delta computed across a 32-bit wrap.
	wrapPlausibleFloorK = 1_000_000
)

// dirState is one direction's controller state. Rates are kbit/s, times µs
// since the controller's start.
type dirState struct {
	rate        int64 // S, the controller's rate (wire rate)
	lastApplied int64 // what the backend was last told (0 = nothing yet)
	confirmed   int64 // what the backend confirmed (SurfaceBackendErrors)
	sent        int64 // the rate of the last decision, awaiting ReportApply

	achieved int64 // A, from the last achieved-rate sample (wire rate)
	loadPct  int64
	class    LoadClass
	fresh    bool  // an achieved-rate sample arrived since the last increase
	highAt   int64 // time of the last sample with class high, µs; -1 = never
	prevAch  int64 // the achieved rate of the sample before (CutToAchieved)
	knee     int64 // rate before the last achieved cut, kbit/s (FastRecovery); 0 = none
	kneeAt   int64 // when it was set, µs
	ev       evidence

	tCut, tDecay int64

	comp, tDelay, tUp, tDown int64 // compensation and compensated thresholds, µs

	// Bufferbloat window (the write position is shared, Controller.winPos).
	delayed  []bool
	deltas   []int64
	nDelayed int
	sumDelta int64
	avg      int64
	bloat    bool

	// Delay jitter (Improvements.JitterThreshold): the last two deltas,
	// how many have been seen, and 16 × the EWMA of the second difference.
	prevDelta  [2]int64
	seenDeltas int
	jitter16   int64

	// Overhead compensation: decaying sums of observed bytes and of the
	// bytes they took on the wire, and their ratio in ppm.
	bytesSum, wireSum int64
	ratio             int64
}

// slotStats is what a reflector slot learns and may retain per address.
type slotStats struct {
	base [2]int64 // B per direction (index shape.Direction), µs
	ewma [2]int64 // E per direction, µs
}

type slot struct {
	addr netip.Addr
	slotStats
	lastResp  int64
	nOffences int
	responses uint64
}

// Counters are running totals for status and metrics.
type Counters struct {
	// Responses processed through the rate law, and those skipped by the
	// stale guard (AR-07).
	Responses, StaleResponses uint64
	// RejectedSamples were invalid (negative or absurd delay, missing or
	// future timestamp, unknown method) and were treated like loss.
	RejectedSamples uint64
	// ForeignResponses came from a reflector that is not in an active slot.
	ForeignResponses uint64
	// LoadSamples produced an achieved rate; RejectedLoadSamples were out
	// of order or from the future.
	LoadSamples, RejectedLoadSamples uint64
	// CounterWraps and CounterResets count byte counters that went backwards.
	CounterWraps, CounterResets uint64
	// Cuts, Increases and DecaySteps count rate-law steps (per direction).
	// Cuts counts only the bufferbloat cuts that lowered the rate, which
	// are the daemon's event=cut lines.
	Cuts, Increases, DecaySteps uint64
	// Decisions counts rate changes emitted.
	Decisions uint64
	// Replacements counts reflector replacements.
	Replacements uint64
	// DroppedEvents counts events that did not fit in one Output (never
	// expected; kept so a bug cannot hide).
	DroppedEvents uint64
	// Ticks counts the clock's ticks: a driver that keeps its pace ticks
	// at its tick interval whatever else goes on.
	Ticks uint64
}

// Controller is one link's autorate controller: a pure, deterministic state
// machine. It never reads a clock, starts a goroutine or does I/O: time
// arrives with every input, results leave as an Output value. It is not
// safe for concurrent use; Loop serialises access.
type Controller struct {
	cfg tuning.Config
	p   params
	rng *rand.Rand

	started bool
	epoch   time.Time
	now     int64 // µs since epoch, never decreases

	run runState
	dir [2]dirState // index shape.Direction
	// winPos is the window's shared write position (AR-10).
	winPos int

	slots    []slot
	offences []bool // slot p's ring is offences[p*W : (p+1)*W]
	ringPos  int
	pool     []netip.Addr // pool[:Pingers] are the active slots' reflectors
	retained map[netip.Addr]slotStats

	lastResp       int64 // global last-response time
	lastRespSeen   int64 // receive time of the newest response
	haveResp       bool
	lastCheck      int64
	lastRotation   int64
	lastComparison int64
	lastProbeStart int64
	probeGen       uint64

	idleAccum, lastIdle int64
	idleClock           bool

	stallStart int64
	stallFired bool

	// silentSwaps counts replacements for missed health checks since the
	// last response; silentGap and silentNext space them once a pool's
	// worth went unanswered (Improvements.SilentBackoff).
	silentSwaps           int
	silentGap, silentNext int64

	havePrev      bool
	prevAt        int64
	prev          LoadSample
	rateDone      bool // an achieved rate has been computed (first-tick rule)
	wrapPlausible int64

	engaged              bool
	queueOn              bool
	queueSince, queueSum int64
	queueN               int64
	cleanOn              bool
	cleanSince           int64

	counters Counters
	out      Output
}

// New returns a controller for cfg, or the configuration's problems. rng
// supplies the start-up shuffle of the reflectors and the hourly random
// rotation; pass a seeded source (nil uses a fixed seed, for tests and
// simulations that want identical runs).
func New(cfg tuning.Config, rng *rand.Rand) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rng == nil {
		rng = rand.New(rand.NewPCG(0x6d6163616b65, 0x6175746f72617465))
	}
	cfg.Reflectors = append([]netip.Addr(nil), cfg.Reflectors...)
	c := &Controller{cfg: cfg, p: newParams(cfg), rng: rng, retained: map[netip.Addr]slotStats{}}
	c.pool = cfg.Reflectors
	for i, a := range c.pool {
		c.pool[i] = a.Unmap()
	}
	if cfg.RandomizeReflectors {
		c.rng.Shuffle(len(c.pool), func(i, j int) { c.pool[i], c.pool[j] = c.pool[j], c.pool[i] })
	}
	c.slots = make([]slot, c.p.pingers)
	c.offences = make([]bool, c.p.pingers*c.p.offenceWindow)
	for i := range c.slots {
		c.slots[i] = slot{addr: c.pool[i], slotStats: freshStats()}
	}
	maxK := max(c.p.dir[0].maxK, c.p.dir[1].maxK)
	c.wrapPlausible = max(wrapPlausibleFloorK, 4*maxK)
	for i := range c.dir {
		ds := &c.dir[i]
		dp := &c.p.dir[i]
		ds.delayed = make([]bool, c.p.window)
		ds.deltas = make([]int64, c.p.window)
		ds.rate = dp.startK
		ds.ratio = shape.ShareOne
		ds.highAt = -1
		ds.ev = newEvidence()
		if c.p.compensate {
			mtu := int64(cfg.MTU)
			if mtu == 0 {
				mtu = tuning.DefaultMTU
			}
			ds.ratio = c.p.framing.PacketShare(mtu)
		}
		c.compensate(ds, dp)
	}
	return c, nil
}

func freshStats() slotStats {
	return slotStats{base: [2]int64{initialBaseline, initialBaseline}}
}

// Config returns the configuration the controller runs with.
func (c *Controller) Config() tuning.Config { return c.cfg }

// Start begins operation at now (autorate.md §7.1): every timer starts
// at now, and in the shaping modes the start rates are applied (AR-21).
// Any other input calls Start implicitly if it has not been called; a
// second call does nothing.
func (c *Controller) Start(now time.Time) Output {
	c.out.nd, c.out.ne = 0, 0
	if !c.started {
		c.start(now)
	}
	return c.out
}

func (c *Controller) start(now time.Time) {
	c.started = true
	c.epoch = now
	c.now = 0
	for i := range c.dir {
		ds := &c.dir[i]
		ds.tCut, ds.tDecay = 0, 0
	}
	for i := range c.slots {
		c.slots[i].lastResp = 0
	}
	c.lastResp, c.lastCheck, c.lastRotation, c.lastComparison, c.lastProbeStart = 0, 0, 0, 0, 0
	c.probeGen++
	c.apply([2]Reason{ReasonStart, ReasonStart})
}

// begin resets the output and brings the clock to now. The controller's
// clock never runs backwards: an earlier now is taken as the latest one.
func (c *Controller) begin(now time.Time) int64 {
	c.out.nd, c.out.ne = 0, 0
	if !c.started {
		c.start(now)
		return c.now
	}
	if t := c.micros(now); t > c.now {
		c.now = t
	}
	return c.now
}

func (c *Controller) micros(t time.Time) int64 {
	return int64(t.Sub(c.epoch) / time.Microsecond)
}

func (c *Controller) emit(e Event) {
	if !c.out.addEvent(e) {
		c.counters.DroppedEvents++
	}
}

// shaping reports whether rate decisions go to the backend now.
func (c *Controller) shaping() bool {
	return c.cfg.Mode == tuning.ModeAutorate || (c.cfg.Mode == tuning.ModeBalanced && c.engaged)
}

// Delay processes one reflector response received at s.At and handled at
// now (autorate.md §5.3-§5.10). Invalid samples (a negative RTT, a delay
// beyond MaxRTT or MaxDelay, a missing timestamp or one later than now, an
// unknown method) are counted and treated like probe loss; so is a
// response from a reflector outside the active slots.
func (c *Controller) Delay(now time.Time, s DelaySample) Output {
	t := c.begin(now)
	p, at, owd, ok := c.checkDelay(t, s)
	if !ok {
		c.nonResponse(t)
		return c.out
	}
	c.silentEnded()
	switch c.run {
	case sleeping:
		c.wakeTest(t)
	case stalled:
		// A response ends the stall; no baseline or rate processing.
		c.lastResp = t
		c.run = running
		c.emit(Event{Kind: EventStallEnd, Down: c.dir[shape.Download].achieved * 1000, Up: c.dir[shape.Upload].achieved * 1000})
	default:
		c.response(t, p, at, owd, s.Method)
	}
	return c.out
}

func (c *Controller) checkDelay(t int64, s DelaySample) (p int, at int64, owd [2]int64, ok bool) {
	switch {
	case !s.Reflector.IsValid(), s.At.IsZero():
		c.counters.RejectedSamples++
		return 0, 0, owd, false
	}
	at = c.micros(s.At)
	if at > t {
		c.counters.RejectedSamples++
		return 0, 0, owd, false
	}
	switch s.Method {
	case RTTHalf:
		if s.DownOWD < 0 || s.DownOWD > MaxRTT/2 {
			c.counters.RejectedSamples++
			return 0, 0, owd, false
		}
	case ICMPTimestamp, OneWay:
		if s.DownOWD < -tuning.MaxDelay || s.DownOWD > tuning.MaxDelay || s.UpOWD < -tuning.MaxDelay || s.UpOWD > tuning.MaxDelay {
			c.counters.RejectedSamples++
			return 0, 0, owd, false
		}
	default:
		c.counters.RejectedSamples++
		return 0, 0, owd, false
	}
	addr := s.Reflector.Unmap()
	p = -1
	for i := range c.slots {
		if c.slots[i].addr == addr {
			p = i
			break
		}
	}
	if p < 0 {
		c.counters.ForeignResponses++
		return 0, 0, owd, false
	}
	owd[shape.Download] = us(s.DownOWD)
	owd[shape.Upload] = us(s.UpOWD)
	return p, at, owd, true
}

// downFirst is the order upstream processes the directions in.
var downFirst = [2]shape.Direction{shape.Download, shape.Upload}

// response is the full processing of a valid response in RUNNING.
func (c *Controller) response(t int64, p int, at int64, owd [2]int64, method DelayMethod) {
	sl := &c.slots[p]
	dn, up := shape.Download, shape.Upload
	var delta [2]int64

	// Baselines and deltas (AR-02, AR-03, AR-05).
	guarded := false
	if method == ICMPTimestamp {
		dd := owd[dn] - sl.base[dn]
		du := owd[up] - sl.base[up]
		if abs(dd)+abs(du) >= rolloverGuard {
			sl.base = owd
			guarded = true
		}
	}
	if !guarded {
		sl.base[dn], delta[dn] = baselineStep(c.p.alphaUp, c.p.alphaDown, owd[dn], sl.base[dn])
		if method == RTTHalf {
			sl.base[up], delta[up] = sl.base[dn], delta[dn]
		} else {
			sl.base[up], delta[up] = baselineStep(c.p.alphaUp, c.p.alphaDown, owd[up], sl.base[up])
		}
	}

	// Delta EWMA, for ranking reflectors only, gated by load (AR-06).
	if c.dir[dn].loadPct < c.p.highLoadPct && c.dir[up].loadPct < c.p.highLoadPct {
		sl.ewma[dn] = ewma(c.p.alphaE, delta[dn], sl.ewma[dn])
		if method == RTTHalf {
			sl.ewma[up] = sl.ewma[dn]
		} else {
			sl.ewma[up] = ewma(c.p.alphaE, delta[up], sl.ewma[up])
		}
	}

	// Last-response times are the receive time, never moved backwards by
	// an out-of-order sample.
	sl.lastResp = max(sl.lastResp, at)
	if !c.haveResp || at >= c.lastRespSeen {
		c.lastResp, c.lastRespSeen, c.haveResp = at, at, true
	}
	sl.responses++

	// Stale guard (AR-07): baselines only.
	if t-at > c.p.stale {
		c.counters.StaleResponses++
		return
	}
	c.counters.Responses++

	if c.cfg.Improvements.WholeRTT && method == RTTHalf {
		// The rise of the round trip, not half of it: a queue in one
		// direction shows at its full size.
		delta[dn], delta[up] = 2*delta[dn], 2*delta[up]
	}
	if c.cfg.Improvements.JitterThreshold {
		for d := range c.dir {
			c.trackJitter(&c.dir[d], &c.p.dir[d], delta[d])
		}
	}
	c.window(delta)

	if c.shaping() {
		var reasons [2]Reason
		spare := c.spared(t)
		for _, d := range downFirst {
			if spare[d] {
				continue // DirectionalCut: not this direction's queue
			}
			reasons[d] = c.updateRate(d, t)
		}
		c.apply(reasons)
	}
	if c.cfg.Mode == tuning.ModeBalanced {
		c.balance(t)
	}
	c.sleepAccounting(t)
	if c.run == running {
		c.healthCheck(t)
	}
}

// window writes one response's deltas into both directions' rings at the
// shared position (AR-10).
func (c *Controller) window(delta [2]int64) {
	pos := c.winPos
	for d := range c.dir {
		ds := &c.dir[d]
		if ds.delayed[pos] {
			ds.nDelayed--
		}
		ds.sumDelta -= ds.deltas[pos]
		late := delta[d] > ds.tDelay
		ds.delayed[pos] = late
		ds.deltas[pos] = delta[d]
		if late {
			ds.nDelayed++
		}
		ds.sumDelta += delta[d]
		ds.avg = ds.sumDelta / int64(c.p.window)
		ds.bloat = ds.nDelayed >= c.p.votes
	}
	c.winPos = (pos + 1) % c.p.window
}

// kneeLifetime is how long the rate before an achieved cut is remembered
// as a target for FastRecovery.
const kneeLifetime = 5_000_000 // µs

// saturatingRecently is how long after its last high-load sample a
// direction still counts as saturating its pipe (Improvements.CutToAchieved).
const saturatingRecently = 1_000_000 // µs

// updateRate is the per-direction rate law (autorate.md §5.5, §5.6).
func (c *Controller) updateRate(d shape.Direction, t int64) Reason {
	ds, dp := &c.dir[d], &c.p.dir[d]
	reason := ReasonNone
	before := ds.rate
	switch {
	case ds.bloat:
		if t > ds.tCut+c.p.bbRefractory {
			if c.inOutage(ds, t) {
				// OutageHold: the link carries nothing now; cutting
				// would only leave the pipe at the floor when it is back.
				ds.tCut, ds.tDecay = t, t
				break
			}
			x := cutGrade(ds.avg, ds.tDelay, ds.tDown)
			ds.rate = cutRate(ds.rate, x, c.p.cutMin, c.p.cutMax)
			if c.cfg.Improvements.CutToAchieved && ds.saturating(t) {
				before := ds.rate
				// The larger of the last two samples, so that a single
				// 200 ms dip of a bursty radio link does not set the rate.
				a := ds.shown()
				share := c.p.achievedCut
				if c.cfg.Improvements.DrainCut {
					share = c.drainShare(ds.avg)
				}
				ds.rate = min(ds.rate, a*share/1000)
				c.noteCut(ds, a, t)
				if c.cfg.Improvements.FastRecovery && before > ds.rate {
					if ds.knee == 0 || t-ds.kneeAt > kneeLifetime {
						ds.knee = before
					}
					ds.kneeAt = t
				}
			}
			ds.tCut, ds.tDecay = t, t
			reason = ReasonCut
		}
	case ds.class == LoadHigh:
		if ds.fresh && t > ds.tCut+c.p.bbRefractory {
			y := increaseGrade(ds.avg, ds.tDelay, ds.tUp)
			old := ds.rate
			ds.rate = increaseRate(ds.rate, y, c.p.upMin, c.p.upMax)
			if c.cfg.Improvements.PlateauHold || c.cfg.Improvements.PeakRecovery {
				ds.rate = c.shapeIncrease(ds, old, ds.rate, t)
			} else if c.cfg.Improvements.FastRecovery && ds.knee > old && t-ds.kneeAt <= kneeLifetime && ds.nDelayed == 0 {
				// A clean window below the rate the link carried before an
				// achieved cut: go halfway back at once. The download's
				// counter shows what the link delivers, so it goes no
				// higher than AchievedCut × that: the link must show the
				// capacity before the pipe takes it.
				target := ds.knee
				if d == shape.Download {
					target = min(target, max(ds.achieved, ds.prevAch)*c.p.achievedCut/1000)
				}
				if target > old {
					ds.rate = max(ds.rate, old+(target-old)/2)
				}
			}
			ds.fresh = false
			ds.tDecay = t
			reason = ReasonIncrease
			c.counters.Increases++
		}
	default:
		if t > ds.tDecay+c.p.decayRefractory {
			old := ds.rate
			ds.rate = decayRate(ds.rate, dp.baseK, c.p.decay, c.p.recover)
			if c.cfg.Improvements.BaseRecovery && old < dp.baseK && ds.nDelayed == 0 {
				// A quarter of the way back to base per step, not 1 %.
				ds.rate = max(ds.rate, old+(dp.baseK-old)/4)
			}
			switch {
			case ds.rate < old:
				reason = ReasonDecay
			case ds.rate > old:
				reason = ReasonRecover
			}
			ds.tDecay = t
			c.counters.DecaySteps++
		}
	}
	ds.rate = clampRate(ds.rate, dp.minK, dp.maxK)
	if reason == ReasonCut && ds.rate < before {
		// Only a cut that lowers the rate counts: one at the floor (or
		// of a monitor-only direction) changes nothing, and neither the
		// log nor the metrics see it.
		c.counters.Cuts++
	}
	return reason
}

// apply emits a decision for every shaped direction whose rate differs
// from the last applied one, and recomputes its compensation (AR-21,
// §5.10). Monitor-only directions are never sent.
func (c *Controller) apply(reasons [2]Reason) {
	if !c.shaping() {
		return
	}
	for _, d := range downFirst {
		ds, dp := &c.dir[d], &c.p.dir[d]
		if dp.monitorOnly || ds.rate == ds.lastApplied {
			continue
		}
		r := reasons[d]
		if c.cfg.Improvements.DeadBand && inDeadBand(r, ds.rate, ds.lastApplied, dp) {
			continue
		}
		if r == ReasonNone {
			r = ReasonRetry
		}
		c.out.addDecision(Decision{Direction: d, Rate: c.pipeRate(ds) * 1000, Reason: r})
		c.counters.Decisions++
		ds.lastApplied, ds.sent = ds.rate, ds.rate
		c.compensate(ds, dp)
	}
}

// inDeadBand reports whether a move of the rate from last (the pipe's) to
// rate for reason r is too small to send (Improvements.DeadBand).
func inDeadBand(r Reason, rate, last int64, dp *dirParams) bool {
	switch r {
	case ReasonIncrease, ReasonDecay, ReasonRecover:
	default:
		return false
	}
	if last <= 0 || rate == dp.minK || rate == dp.maxK || rate == dp.baseK {
		return false
	}
	diff := rate - last
	if diff < 0 {
		diff = -diff
	}
	return diff*1_000_000 < tuning.DeadBandPPM*last
}

// compensate recomputes the serialisation-delay compensation and the
// compensated thresholds from the current rate (AR-19). With
// Improvements.JitterThreshold the delay and full-increase thresholds are
// scaled to the delay's jitter; the full-cut threshold is not: when to cut
// follows the jitter, how hard follows the queue's size, so a 20 ms
// average on a steady link cuts gently, not at the strongest factor.
func (c *Controller) compensate(ds *dirState, dp *dirParams) {
	ds.comp = compensation(c.p.wirePacketBits, ds.rate)
	share := c.thresholdShare(ds, dp)
	ds.tDelay = dp.delay*share/1000 + ds.comp
	ds.tUp = dp.up*share/1000 + ds.comp
	ds.tDown = dp.down + ds.comp
}

// jitterWarmup is how many deltas JitterThreshold sees before it trusts
// its jitter estimate; until then the thresholds are the configured ones.
const jitterWarmup = 40

// trackJitter updates the direction's delay jitter with a new delta and
// its thresholds with it (Improvements.JitterThreshold). The jitter is
// the EWMA (weight 1/16) of |δ − 2δ₋₁ + δ₋₂|: a queue that grows or drains
// at a steady pace has no second difference, so only the noise of the
// signal counts, not the bloat the thresholds are there to catch.
func (c *Controller) trackJitter(ds *dirState, dp *dirParams, delta int64) {
	if ds.seenDeltas >= 2 {
		sd := abs(delta - 2*ds.prevDelta[0] + ds.prevDelta[1])
		// One spike moves the estimate by at most the delay threshold / 16.
		sd = min(sd, 16*dp.delay)
		ds.jitter16 += sd - ds.jitter16/16
	}
	ds.prevDelta[1], ds.prevDelta[0] = ds.prevDelta[0], delta
	if ds.seenDeltas < jitterWarmup {
		ds.seenDeltas++
	}
	c.compensate(ds, dp)
}

// thresholdShare is the share of the configured thresholds in force, in
// thousandths: 1000, or with JitterThreshold JitterScale × jitter / delay
// threshold, between JitterFloor and 1000.
func (c *Controller) thresholdShare(ds *dirState, dp *dirParams) int64 {
	if !c.cfg.Improvements.JitterThreshold || ds.seenDeltas < jitterWarmup || dp.delay <= 0 {
		return 1000
	}
	share := c.p.jitterScale * (ds.jitter16 / 16) / dp.delay
	return max(c.p.jitterFloor, min(1000, share))
}

// pipeRate is the rate in kbit/s to give the pipe for the controller's
// rate: the pipe counts packet bytes, the controller's rate counts the
// wire, so with overhead the pipe runs at S × bytes/wire-bytes.
func (c *Controller) pipeRate(ds *dirState) int64 {
	return c.pipeRateOf(ds, ds.rate)
}

// ReportApply tells the controller how applying the last decision for d
// went. With Improvements.SurfaceBackendErrors a failure restores the
// previous last-applied rate, so the next rate update sends the rate
// again; otherwise (upstream) errors are ignored.
func (c *Controller) ReportApply(d shape.Direction, err error) {
	if !c.cfg.Improvements.SurfaceBackendErrors || d < 0 || int(d) >= len(c.dir) {
		return
	}
	ds := &c.dir[d]
	if err != nil {
		ds.lastApplied = ds.confirmed
		return
	}
	ds.confirmed = ds.sent
}

// sleepAccounting adds up idle time on processed responses and puts the
// controller to sleep after SleepAfter (AR-22).
func (c *Controller) sleepAccounting(t int64) {
	if !c.cfg.SleepEnabled {
		return
	}
	if c.dir[0].class != LoadIdle || c.dir[1].class != LoadIdle {
		c.idleAccum, c.idleClock = 0, false
		return
	}
	if c.idleClock {
		c.idleAccum += t - c.lastIdle
	}
	c.idleClock, c.lastIdle = true, t
	if c.idleAccum > c.p.sleepAfter {
		c.sleep(t)
	}
}

func (c *Controller) sleep(t int64) {
	c.run = sleeping
	c.emit(Event{Kind: EventSleep, Duration: usDuration(c.idleAccum)})
	c.idleAccum, c.idleClock = 0, false
	c.probeGen++
	if !c.shaping() {
		return
	}
	switch {
	case c.cfg.MinRatesOnSleep:
		c.setMinimum()
		c.apply([2]Reason{ReasonSleepMinimum, ReasonSleepMinimum})
	case c.cfg.Improvements.SleepAtBase:
		for d := range c.dir {
			c.dir[d].rate = min(c.dir[d].rate, c.p.dir[d].baseK)
		}
		c.apply([2]Reason{ReasonSleepBase, ReasonSleepBase})
	}
}

func (c *Controller) setMinimum() {
	for d := range c.dir {
		c.dir[d].rate = c.p.dir[d].minK
	}
}

// wakeTest wakes a sleeping controller when either direction carries
// traffic (AR-22).
func (c *Controller) wakeTest(t int64) {
	dn, up := &c.dir[shape.Download], &c.dir[shape.Upload]
	if dn.achieved <= c.p.activeK && up.achieved <= c.p.activeK {
		return
	}
	c.run = running
	c.idleAccum, c.idleClock = 0, false
	grace := t + 2*c.p.pingInterval
	c.lastResp, c.lastCheck = grace, grace
	c.lastProbeStart = t
	c.probeGen++
	c.emit(Event{Kind: EventWake, Down: dn.achieved * 1000, Up: up.achieved * 1000})
}

// nonResponse handles an event that is not a valid response: a rejected
// or foreign sample, a tick, or (after the load update) a load sample.
func (c *Controller) nonResponse(t int64) {
	switch c.run {
	case running:
		c.stallTest(t)
		if c.run == running {
			c.healthCheck(t)
			c.liveness(t)
		}
	case sleeping:
		c.wakeTest(t)
	case stalled:
		c.globalTimeout(t)
	}
}

// stallTest enters STALL when responses have stopped and traffic has not
// kept flowing both ways (AR-23).
func (c *Controller) stallTest(t int64) {
	silent := t - c.lastResp
	if silent <= c.p.stallTimeout {
		return
	}
	if c.dir[0].achieved > c.p.stallK && c.dir[1].achieved > c.p.stallK {
		return
	}
	c.run = stalled
	c.stallStart, c.stallFired = t, false
	c.emit(Event{Kind: EventStall, Duration: usDuration(silent)})
}

// globalTimeout restarts probing once per stall episode (AR-23, §7.4).
func (c *Controller) globalTimeout(t int64) {
	if !c.stallFired && t > c.stallStart+c.p.globalTimeout-c.p.stallTimeout {
		c.stallFired = true
		if c.cfg.MinRatesOnSleep && c.shaping() {
			c.setMinimum()
			c.apply([2]Reason{ReasonStallMinimum, ReasonStallMinimum})
		}
		c.restartProbes(t)
		return
	}
	c.liveness(t)
}

// liveness restarts probing whenever no response has come for the global
// timeout and the probes were last started longer ago than that
// (Improvements.ProbeLiveness, upstream PR #413).
func (c *Controller) liveness(t int64) {
	if !c.cfg.Improvements.ProbeLiveness {
		return
	}
	if t-c.lastResp > c.p.globalTimeout && t-c.lastProbeStart > c.p.globalTimeout {
		c.restartProbes(t)
	}
}

func (c *Controller) restartProbes(t int64) {
	c.emit(Event{Kind: EventProbeRestart, Duration: usDuration(t - c.lastResp)})
	c.lastProbeStart = t
	c.probeGen++
}

// Tick is an input without data: time has passed. It runs what upstream
// runs on probe output that is not a response (stall test, health check,
// wake test, global timeout), so a stall is noticed even when nothing else
// arrives.
func (c *Controller) Tick(now time.Time) Output {
	t := c.begin(now)
	c.counters.Ticks++
	c.nonResponse(t)
	return c.out
}

// ProbingPaused reports whether the prober should stop probing (the
// controller sleeps).
func (c *Controller) ProbingPaused() bool { return c.run == sleeping }

// ProbeGeneration changes whenever the prober should look again: a
// reflector was replaced, probing paused or resumed, or a restart is due.
func (c *Controller) ProbeGeneration() uint64 { return c.probeGen }

// ActiveReflectors appends the reflectors to probe, in slot order, to dst.
func (c *Controller) ActiveReflectors(dst []netip.Addr) []netip.Addr {
	for i := range c.slots {
		dst = append(dst, c.slots[i].addr)
	}
	return dst
}

// MonitorInterval is the period at which the caller should read the byte
// counters: MonitorInterval floored at 10 × the serialisation time of one
// wire packet each way at the base rates (AR-08).
func (c *Controller) MonitorInterval() time.Duration { return usDuration(c.p.monitorFloored) }

func abs(v int64) int64 {
	if v < 0 {
		if v == math.MinInt64 {
			return math.MaxInt64
		}
		return -v
	}
	return v
}
