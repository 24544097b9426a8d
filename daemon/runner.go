// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/daemon/idlertt"
	"github.com/macake/macake/daemon/sensors"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
)

// linkRunner is one active link's controller with its sensors: a
// controller.Loop fed by the prober (only the reflectors the controller
// says are active, paused while it sleeps) and the counter sampler. Its
// decisions go to the daemon's owner goroutine (linkSetter). It is created
// by the owner, started after the reconcile that installs its shapers, and
// stopped (and waited for) by the owner.
type linkRunner struct {
	d          *Daemon
	gen        uint64
	name       string
	iface      string
	profileKey string
	policy     config.Link
	mtu        int
	cfg        tuning.Config
	// probes says how each reflector is probed: a measurement can move
	// the auto reflectors from ICMP to TCP, which needs a new prober.
	probes []shape.Reflector

	loop     *controller.Loop
	probe    sensors.Probe
	counters sensors.Counters
	// every is how often the counters are read (the controller's
	// monitor interval).
	every   time.Duration
	initial []netip.Addr
	// note says what the controller lacks (no prober, no counters).
	note    string
	metrics *metrics.Link

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool

	// idleCheckedAt is when the owner last asked the controller for its
	// idle RTT (controllers.learnIdleRTT); touched only by the owner.
	idleCheckedAt time.Time

	// Touched only by the runner's goroutine (OnApply).
	last       [2]int64
	lastFailed time.Time
	// replies counts the prober's replies, so that the runner tells the
	// owner when the idle RTT can be learned (follow, idleRTTAsk).
	replies int

	// rtts are the round trips of the prober's replies, the link's idle
	// RTT (idlertt.Filter); safe from any goroutine.
	rtts *idlertt.Filter
	// ep reports stalls and silence once per episode (touched only by
	// the runner's goroutine).
	ep episodes
}

// state is the controller's snapshot with the link's idle RTT from its
// replies (idlertt.Filter, 0 before the first) in place of the controller's
// lowest baseline, which counts the starting baseline (100 ms each way)
// of a reflector that never answered.
func (r *linkRunner) state(now time.Time) controller.State {
	st := r.loop.State()
	st.IdleRTT, _ = r.rtts.Idle(now)
	return st
}

// idleRTTAsk reports whether the runner asks the owner to learn the idle
// RTT at its nth reply: at idleRTTResponses and at 2, 4, 8 and 16 times
// that, as the filter's figure settles.
func idleRTTAsk(n int) bool {
	k := n / idleRTTResponses
	return n%idleRTTResponses == 0 && k <= 16 && k&(k-1) == 0
}

// sameSpec reports whether r runs the controller that a would get, with
// probes probed the same way, so it can keep running (with its
// baselines) across a reconcile.
func (r *linkRunner) sameSpec(a desired.ActiveLink, mtu int, probes []shape.Reflector) bool {
	return r.profileKey == a.ProfileKey && r.iface == a.Policy.Match.Interface && r.mtu == mtu &&
		reflect.DeepEqual(r.policy, a.Policy) && slices.Equal(r.probes, probes)
}

// sortedAddrs returns a sorted copy, so that the same reflector set in
// another order (the start-up shuffle) compares equal and triggers no
// reconcile. The backends render exemptions canonically whatever the
// order, so this is about not waking the reconciler, not about the rules.
func sortedAddrs(addrs []netip.Addr) []netip.Addr {
	out := slices.Clone(addrs)
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// start runs the loop and the sensors until stop. live is the link's
// shaper as installed, so the first rate change logs where it came from.
func (r *linkRunner) start(parent context.Context, live shape.Link) {
	ctx, cancel := context.WithCancel(parent)
	r.cancel, r.started = cancel, true
	r.last = [2]int64{live.Upload.RateBits, live.Download.RateBits}
	if r.probe != nil {
		if err := r.probe.SetReflectors(r.initial); err != nil {
			r.d.log.Warn("prober refused the reflectors", logging.KeyLink, r.name, logging.KeyError, err)
		}
		r.wg.Go(func() { r.sensorDone("prober", r.probe.Run(ctx), ctx) })
	}
	r.wg.Go(func() { r.follow(ctx) })
}

func (r *linkRunner) sensorDone(what string, err error, ctx context.Context) {
	if err != nil && ctx.Err() == nil {
		r.d.log.Error(what+" stopped; the controller runs without it", logging.KeyLink, r.name, logging.KeyError, err)
	}
}

// stop ends the runner and waits for its goroutines.
func (r *linkRunner) stop() {
	if !r.started {
		return
	}
	r.cancel()
	r.wg.Wait()
	r.started = false
}

// follow drives the link's controller: it feeds it the prober's replies
// and a counter reading every monitor interval, ticks it when nothing
// else does, keeps the prober on the controller's plan (reflectors,
// pause), tells the owner when the set of reflectors to exempt changes,
// and refreshes the metrics once a second. One goroutine does all of it,
// so a reply reaches the controller with one goroutine hand-off (from the
// prober's reader) and a counter reading with none: at 20 replies a
// second the daemon's cost is its wake-ups, not its work. The counter
// reads and the ticks share one timer on the daemon's grid (tickgrid),
// where the prober's sends and the history fire too.
func (r *linkRunner) follow(ctx context.Context) {
	r.loop.Start(ctx)
	var samples <-chan probe.Sample
	if r.probe != nil {
		samples = r.probe.Samples()
	}
	now := time.Now()
	r.ep.started = now
	var nextRead time.Time
	if r.counters != nil {
		r.readCounters(ctx, now) // the baseline
		nextRead = r.d.grid.Next(now, r.every)
	}
	tickEvery := r.loop.TickInterval()
	nextTick := r.d.grid.Next(now, tickEvery)
	timer := time.NewTimer(time.Until(earliest(nextRead, nextTick)))
	defer timer.Stop()
	var lastMetrics time.Time
	current := r.initial
	paused := false
	changes := r.loop.ProbeChanges()
	for {
		select {
		case <-ctx.Done():
			return
		case s, ok := <-samples:
			if !ok {
				samples = nil
				continue
			}
			replied := s.Kind == probe.KindReply
			if r.metrics != nil {
				if replied {
					r.metrics.Reflector(s.Reflector).Sample(s.RTT)
				} else {
					r.metrics.Reflector(s.Reflector).Lost()
				}
			}
			if !replied {
				continue
			}
			// Only a reply is a sample: a lost or timed-out probe tells
			// the controller nothing but its silence.
			r.rtts.Add(s.Received, s.RTT)
			r.loop.Delay(ctx, sensors.DelaySample(s))
			r.replied(ctx, time.Now())
			if r.replies++; r.policy.Shaper.Queue.Auto && idleRTTAsk(r.replies) {
				// On an idle link no rate changes and the next drift
				// check can be half a minute away: the first download
				// would meet DefaultIdleRTT's queue. Asked again at
				// twice as many replies, a few times, as the figure
				// settles.
				select {
				case r.d.idleReqs <- linkNote{link: r.name, gen: r.gen}:
				case <-ctx.Done():
					return
				}
			}
		case <-timer.C:
			now := time.Now()
			if due(now, nextRead) {
				// Stamped with the time of the reading, not of the
				// timer: after a slow SetRate the timer is long past, and
				// a reading stamped with it would count the bytes of a
				// longer window over a nominal interval and hide the gap
				// from ifstat's check.
				r.readCounters(ctx, now)
				nextRead = r.d.grid.Next(now, r.every)
			}
			if due(now, nextTick) {
				r.loop.Tick(ctx)
				r.noteTime(ctx, now, paused)
				if r.metrics != nil && now.Sub(lastMetrics) >= time.Second-time.Millisecond {
					lastMetrics = now
					r.updateMetrics()
				}
				nextTick = r.d.grid.Next(now, tickEvery)
			}
			timer.Reset(time.Until(earliest(nextRead, nextTick)))
		case <-changes:
			plan := r.loop.ProbePlan()
			paused = plan.Paused
			if r.probe != nil {
				r.probe.SetPaused(plan.Paused)
			}
			next := sortedAddrs(plan.Reflectors)
			if slices.Equal(next, current) {
				continue
			}
			current = next
			if r.probe != nil {
				if err := r.probe.SetReflectors(current); err != nil {
					r.d.log.Warn("prober refused the reflectors", logging.KeyLink, r.name, logging.KeyError, err)
				}
			}
			select {
			case r.d.reflReqs <- reflectorNote{link: r.name, gen: r.gen, addrs: slices.Clone(current)}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// due reports whether an instant set for the timer has come (zero: unset).
func due(now, t time.Time) bool { return !t.IsZero() && !now.Before(t) }

// earliest returns the earlier of the set times (zero: unset).
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// readCounters takes one counter reading and feeds it to the controller
// when it is a measurement.
func (r *linkRunner) readCounters(ctx context.Context, now time.Time) {
	if sample, ok := sensors.LoadSample(r.counters.Read(now)); ok {
		r.loop.Load(ctx, sample)
	}
}

// updateMetrics copies the controller's state into the metrics.
func (r *linkRunner) updateMetrics() {
	st := r.loop.State()
	r.metrics.SetState(st.Status.String())
	var live shape.Link
	installed := false
	if s := r.d.pubLive.Load(); s != nil {
		live, installed = s.Link(r.name)
	}
	r.metrics.SetEngaged(installed)
	for _, dir := range shape.Directions {
		ds, md := st.Direction(dir), r.metrics.Direction(dir)
		md.SetAchievedRate(ds.Achieved)
		md.SetLoad(float64(ds.LoadPercent) / 100)
		if st.Counters.Responses > 0 {
			md.SetDelay(ds.Baseline, ds.DeltaEWMA)
			md.SetWindowDelay(ds.WindowAverage)
		} else {
			// The baseline is the controller's starting value, not a
			// measurement; status shows "-" for it too.
			md.SetDelayUnknown()
		}
		md.SetBufferbloatSamples(ds.Delayed)
		md.SetShaperRate(live.Pipe(dir).RateBits)
	}
}

// onApply logs a decision and counts it; it runs on the loop goroutine.
func (r *linkRunner) onApply(dec controller.Decision, err error) {
	ctx := context.Background()
	if err != nil {
		// A missing shaper (hook line gone, balanced released) fails every
		// decision until it is back; say so once a minute, not 5 times a
		// second.
		level := slog.LevelWarn
		if errors.Is(err, errNotInstalled) || errors.Is(err, errStaleController) || errors.Is(err, context.Canceled) {
			level = slog.LevelDebug
		}
		if time.Since(r.lastFailed) >= time.Minute || level == slog.LevelDebug {
			if level == slog.LevelWarn {
				r.lastFailed = time.Now()
			}
			r.d.log.Log(ctx, level, "setting a rate failed; the controller retries", logging.KeyLink, r.name,
				logging.KeyDirection, dec.Direction.String(), "rate_bits_per_second", dec.Rate, logging.KeyError, err)
		}
		return
	}
	from := r.last[dec.Direction]
	r.last[dec.Direction] = dec.Rate
	change := logging.RateChange{Link: r.name, Direction: dec.Direction, FromBits: from, ToBits: dec.Rate, Reason: dec.Reason.String(), Cut: dec.Reason == controller.ReasonCut}
	ev, level, _ := change.Event()
	if r.metrics != nil {
		r.metrics.Direction(dec.Direction).RateChanged(from, dec.Rate, ev == logging.EventCut)
	}
	if from == dec.Rate || !r.d.log.Enabled(ctx, level) {
		return
	}
	ds := r.loop.State().Direction(dec.Direction)
	change.AchievedBits, change.Baseline, change.Delay = ds.Achieved, ds.Baseline, ds.WindowAverage
	r.d.ev.RateChanged(ctx, change)
}

// onEvent logs a controller event.
func (r *linkRunner) onEvent(e controller.Event) {
	ctx := context.Background()
	switch e.Kind {
	case controller.EventEngage:
		r.d.ev.Engage(ctx, r.name, e.Duration, e.Delay)
	case controller.EventRelease:
		r.d.ev.Release(ctx, r.name, e.Duration)
	case controller.EventSleep:
		r.d.ev.Sleep(ctx, r.name, e.Duration)
	case controller.EventWake:
		r.d.ev.Wake(ctx, r.name, e.Down, e.Up)
	case controller.EventStall:
		r.stalled(time.Now(), e.Duration)
	case controller.EventStallEnd:
		r.resumed(ctx, e.Down, e.Up)
	case controller.EventReflectorReplaced:
		if e.Old != e.New {
			if r.ep.silent {
				// Said once for the whole silence (noteTime).
				r.ep.swapped++
				r.d.log.Debug("reflector replaced", logging.KeyLink, r.name, "old", e.Old, "new", e.New, logging.KeyReason, e.Cause.String())
			} else {
				r.d.ev.ReflectorReplaced(ctx, r.name, e.Old, e.New, e.Cause.String())
			}
			if r.metrics != nil {
				r.metrics.RemoveReflector(e.Old)
			}
		}
	default:
		r.d.log.Debug(e.String(), logging.KeyLink, r.name)
	}
}

func (r *linkRunner) onError(err error) {
	if !errors.Is(err, context.Canceled) {
		r.d.log.Warn("balanced mode could not switch the shaper; it retries", logging.KeyLink, r.name, logging.KeyError, err)
	}
}

// linkSetter is a runner's controller.RateSetter and ShaperSwitch: it
// hands each decision to the owner goroutine and waits for the outcome.
type linkSetter struct{ r *linkRunner }

func (s linkSetter) ask(ctx context.Context, send func(reply chan error) bool) error {
	reply := make(chan error, 1)
	if !send(reply) {
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SetRate implements controller.RateSetter.
func (s linkSetter) SetRate(ctx context.Context, dir shape.Direction, rateBits int64) error {
	return s.ask(ctx, func(reply chan error) bool {
		select {
		case s.r.d.rateReqs <- rateRequest{link: s.r.name, gen: s.r.gen, dir: dir, rate: rateBits, reply: reply}:
			return true
		case <-ctx.Done():
			return false
		}
	})
}

// Engage implements controller.ShaperSwitch.
func (s linkSetter) Engage(ctx context.Context, uploadBits, downloadBits int64) error {
	return s.switchTo(ctx, true, uploadBits, downloadBits)
}

// Release implements controller.ShaperSwitch.
func (s linkSetter) Release(ctx context.Context) error { return s.switchTo(ctx, false, 0, 0) }

func (s linkSetter) switchTo(ctx context.Context, engage bool, up, down int64) error {
	return s.ask(ctx, func(reply chan error) bool {
		select {
		case s.r.d.switchReqs <- switchRequest{link: s.r.name, gen: s.r.gen, engage: engage, upBits: up, dnBits: down, reply: reply}:
			return true
		case <-ctx.Done():
			return false
		}
	})
}
