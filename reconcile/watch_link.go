// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
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
	cfg        controller.Config

	loop     *controller.Loop
	probe    Probe
	counters Counters
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

	// Touched only by the runner's goroutine (OnApply).
	last       [2]int64
	lastFailed time.Time
}

// sameSpec reports whether r runs the controller that a would get, so it
// can keep running (with its baselines) across a reconcile.
func (r *linkRunner) sameSpec(a ActiveLink, mtu int) bool {
	return r.profileKey == a.ProfileKey && r.iface == a.Policy.Match.Interface && r.mtu == mtu &&
		reflect.DeepEqual(r.policy, a.Policy)
}

// carried is what a controller restarted on the same network takes over
// from the one it replaces.
type carried struct {
	// rates are the old controller's rates (controller rates, bit/s).
	rates Rates
	cfg   controller.Config
}

// newRunner builds the controller of active link a (not started). With
// from (a restart on the same network: another key was edited, or the
// machine woke), a direction whose bounds and base rate are unchanged
// starts at the old controller's rate, and one whose bounds or base the
// user edited starts at its new base rate, not at the known-good rate.
// The returned Rates are the pipe rates the desired state carries for the
// new controller: the old pipe rate, the new base's, or 0 (Desired
// decides: known-good or policy).
func (d *Daemon) newRunner(a ActiveLink, mtu int, from *carried) (*linkRunner, Rates, error) {
	var pipes Rates
	cfg, err := ControllerConfig(a.Policy, d.profile(a.ProfileKey), mtu)
	if err != nil {
		return nil, pipes, err
	}
	kernelOverhead := d.cfg.Backend.KernelOverhead
	if kernelOverhead {
		// The backend's qdisc adds overhead and mpu to every packet, so
		// the controller's rate goes to it unchanged (Inputs.KernelOverhead);
		// compensating here too would count the overhead twice.
		cfg.Overhead, cfg.MPU = 0, 0
	}
	adaptive := a.Policy.Shaper.Mode == config.ModeAutorate || a.Policy.Shaper.Mode == config.ModeBalanced
	if from != nil && adaptive {
		old := d.rates[a.Policy.Name]
		for _, dir := range shape.Directions {
			dc, oc := &cfg.Download, from.cfg.Download
			rate, pipe := from.rates.Download, old.Download
			if dir == shape.Upload {
				dc, oc = &cfg.Upload, from.cfg.Upload
				rate, pipe = from.rates.Upload, old.Upload
			}
			if dc.Min == oc.Min && dc.Base == oc.Base && dc.Max == oc.Max && rate > 0 {
				dc.Start = rate
			} else {
				dc.Start, pipe = dc.Base, shaperRate(a.Policy, dc.Base, mtu, kernelOverhead)
			}
			pipes = pipes.with(dir, pipe)
		}
	}
	ctl, err := controller.New(cfg, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(d.gen))))
	if err != nil {
		return nil, pipes, err
	}
	d.gen++
	r := &linkRunner{
		d: d, gen: d.gen, name: a.Policy.Name, iface: a.Policy.Match.Interface, profileKey: a.ProfileKey,
		policy: a.Policy, mtu: mtu, cfg: cfg, initial: sortedAddrs(ctl.ActiveReflectors(nil)),
	}
	var notes []string
	if d.cfg.Sensors == nil {
		notes = append(notes, d.cfg.SensorsNote)
	} else {
		if r.probe, err = d.cfg.Sensors.Probe(r.name, cfg.PingInterval); err != nil {
			notes = append(notes, fmt.Sprintf("no delay measurements: %v", err))
			r.probe = nil
		}
		r.every = ctl.MonitorInterval()
		if r.counters, err = d.cfg.Sensors.Counters(r.iface, r.every); err != nil {
			notes = append(notes, fmt.Sprintf("no load measurements: %v", err))
			r.counters = nil
		}
	}
	for _, n := range notes {
		if n != "" {
			d.log.Warn("controller runs without a sensor", logging.KeyLink, r.name, logging.KeyError, n)
			r.note = joinNote(r.note, n)
		}
	}
	lc := controller.LoopConfig{
		Controller: ctl, Setter: linkSetter{r},
		OnEvent: r.onEvent, OnApply: r.onApply, OnError: r.onError,
	}
	if r.counters != nil {
		// Every load sample runs the stall and wake tests, so the
		// controller needs its own tick only as a fallback: a tick every
		// stall timeout (250 ms) would be four more wake-ups a second.
		lc.TickInterval = time.Second
	}
	if r.loop, err = controller.NewLoop(lc); err != nil {
		return nil, pipes, err
	}
	if d.cfg.Metrics != nil {
		r.metrics = d.cfg.Metrics.Link(r.name)
		for _, dir := range shape.Directions {
			dc := cfg.Download
			if dir == shape.Upload {
				dc = cfg.Upload
			}
			r.metrics.Direction(dir).SetRateBounds(dc.Min, dc.Max)
		}
	}
	return r, pipes, nil
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

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
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
// second the daemon's cost is its wake-ups, not its work.
func (r *linkRunner) follow(ctx context.Context) {
	r.loop.Start(ctx)
	var samples <-chan probe.Sample
	if r.probe != nil {
		samples = r.probe.Samples()
	}
	var reads <-chan time.Time
	if r.counters != nil {
		t := time.NewTicker(r.every)
		defer t.Stop()
		reads = t.C
		r.readCounters(ctx, time.Now()) // the baseline
	}
	tick := time.NewTicker(r.loop.TickInterval())
	defer tick.Stop()
	var lastMetrics time.Time
	current := r.initial
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
			if replied {
				r.loop.Delay(ctx, delaySample(s))
			}
		case <-reads:
			// A tick carries the time it was due, which after a slow
			// SetRate is long past: stamped with it, a reading would
			// count the bytes of a longer window over a nominal
			// interval and hide the gap from ifstat's check.
			r.readCounters(ctx, time.Now())
		case now := <-tick.C:
			r.loop.Tick(ctx)
			if r.metrics != nil && now.Sub(lastMetrics) >= time.Second-time.Millisecond {
				lastMetrics = now
				r.updateMetrics()
			}
		case <-changes:
			plan := r.loop.ProbePlan()
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

// readCounters takes one counter reading and feeds it to the controller
// when it is a measurement.
func (r *linkRunner) readCounters(ctx context.Context, now time.Time) {
	if sample, ok := loadSample(r.counters.Read(now)); ok {
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
		md.SetDelay(ds.Baseline, ds.DeltaEWMA)
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
	if r.metrics != nil {
		r.metrics.Direction(dec.Direction).RateChanged(from, dec.Rate)
	}
	if from == dec.Rate {
		return
	}
	level := slog.LevelDebug
	if dec.Rate < from {
		level = slog.LevelInfo
	}
	if !r.d.log.Enabled(ctx, level) {
		return
	}
	ds := r.loop.State().Direction(dec.Direction)
	r.d.ev.RateChanged(ctx, logging.RateChange{
		Link: r.name, Direction: dec.Direction, FromBits: from, ToBits: dec.Rate, Reason: dec.Reason.String(),
		AchievedBits: ds.Achieved, Baseline: ds.Baseline, Delay: ds.WindowAverage,
	})
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
		r.d.ev.Stall(ctx, r.name, e.Duration)
	case controller.EventStallEnd:
		r.d.ev.Resume(ctx, r.name, e.Down, e.Up)
	case controller.EventReflectorReplaced:
		if e.Old != e.New {
			r.d.ev.ReflectorReplaced(ctx, r.name, e.Old, e.New, e.Cause.String())
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

// syncRunners starts and stops controllers so that every active link has
// one built for its policy, network and MTU. A link whose policy or
// network changed, or every link after the machine woke, gets a fresh
// controller; on the same network it starts from the rates it had. It
// returns whether the set changed, and the new runners (started by the
// caller once their shapers are installed).
func (d *Daemon) syncRunners(desire Desire) (fresh []*linkRunner, changed bool) {
	want := map[string]ActiveLink{}
	for _, a := range desire.Active {
		want[a.Policy.Name] = a
	}
	for name := range d.rates {
		if _, ok := want[name]; !ok {
			delete(d.rates, name)
		}
	}
	carry := map[string]*carried{}
	for _, name := range sortedKeys(d.runners) {
		r := d.runners[name]
		a, active := want[name]
		if active && !d.rebaseline && r.sameSpec(a, d.mtu[r.iface]) {
			continue
		}
		d.saveKnownGoodOf(r)
		if active && a.ProfileKey == r.profileKey {
			st := r.loop.State()
			carry[name] = &carried{rates: Rates{Upload: st.Upload.Rate, Download: st.Download.Rate}, cfg: r.cfg}
		}
		d.stopRunner(r)
		changed = true
	}
	d.rebaseline = false
	for _, a := range desire.Active {
		name := a.Policy.Name
		if d.runners[name] != nil {
			continue
		}
		r, pipes, err := d.newRunner(a, d.mtu[a.Policy.Match.Interface], carry[name])
		d.rates[name] = pipes
		if err != nil {
			d.log.Error("cannot start the link's controller; its shaper keeps its rate", logging.KeyLink, name, logging.KeyError, err)
			d.linkErrs[name] = joinNote(d.linkErrs[name], "controller: "+err.Error())
			continue
		}
		d.runners[name] = r
		d.reflectors[name] = r.initial
		fresh = append(fresh, r)
		changed = true
	}
	return fresh, changed
}

// stopRunner stops r and forgets it.
func (d *Daemon) stopRunner(r *linkRunner) {
	r.stop()
	if d.runners[r.name] == r {
		delete(d.runners, r.name)
		delete(d.reflectors, r.name)
		delete(d.engaged, r.name)
		delete(d.switchFailed, r.name)
	}
	if d.cfg.Metrics != nil {
		d.cfg.Metrics.RemoveLink(r.name)
	}
}

// knownGood returns the rates of r's controller worth remembering for its
// network: in an adaptive mode with the shaper in place, after replies
// have arrived, for each direction that carries traffic without
// bufferbloat now. An idle direction proves nothing (it rests at its
// base rate), so it keeps what was known before.
func knownGood(r *linkRunner) (down, up int64) {
	if r.policy.Shaper.Mode != config.ModeAutorate && r.policy.Shaper.Mode != config.ModeBalanced {
		return 0, 0
	}
	st := r.loop.State()
	if !st.Shaping || st.Counters.Responses == 0 || st.Status == controller.StatusStalled {
		return 0, 0
	}
	if !st.Download.Bufferbloat && st.Download.Load != controller.LoadIdle {
		down = st.Download.Rate
	}
	if !st.Upload.Bufferbloat && st.Upload.Load != controller.LoadIdle {
		up = st.Upload.Rate
	}
	return down, up
}

// saveKnownGoodOf records r's known-good rates in the state file.
func (d *Daemon) saveKnownGoodOf(r *linkRunner) {
	d.saveProfiles([]*linkRunner{r})
}

// saveKnownGood records every controller's known-good rates.
func (d *Daemon) saveKnownGood() {
	rs := make([]*linkRunner, 0, len(d.runners))
	for _, name := range sortedKeys(d.runners) {
		rs = append(rs, d.runners[name])
	}
	d.saveProfiles(rs)
}

func (d *Daemon) saveProfiles(rs []*linkRunner) {
	type update struct {
		key, link string
		down, up  int64
	}
	var ups []update
	for _, r := range rs {
		down, up := knownGood(r)
		if down == 0 && up == 0 {
			continue
		}
		p := d.profile(r.profileKey)
		if (down == 0 || down == p.GoodDownload) && (up == 0 || up == p.GoodUpload) {
			continue
		}
		ups = append(ups, update{r.profileKey, r.name, down, up})
	}
	if len(ups) == 0 {
		return
	}
	now := time.Now().UTC()
	err := d.cfg.Tokens.Update(func(st *state.State) {
		if st.Profiles == nil {
			st.Profiles = map[string]state.Profile{}
		}
		for _, u := range ups {
			p := st.Profiles[u.key]
			p.Link = u.link
			if u.down > 0 {
				p.GoodDownload = u.down
			}
			if u.up > 0 {
				p.GoodUpload = u.up
			}
			p.UpdatedAt = now
			st.Profiles[u.key] = p
		}
	})
	if err != nil {
		d.log.Error("saving the known-good rates", logging.KeyError, err)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
