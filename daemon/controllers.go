// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/macake/macake/controller"
	"github.com/macake/macake/controller/autoqueue"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/daemon/idlertt"
	"github.com/macake/macake/daemon/sensors"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// controllers are the running controllers, one linkRunner per active link,
// and what the desired state takes from them: their rates, whether a
// balanced one has engaged, and the reflectors they probe. Owned by the
// loop, like everything else.
type controllers struct {
	d            *Daemon
	runners      map[string]*linkRunner
	rates        map[string]desired.Rates
	engaged      map[string]bool
	reflectors   map[string][]netip.Addr
	switchFailed map[string]time.Time
	// gen numbers the runners, so a decision of a replaced one is refused.
	gen uint64
	// rebaseline: the machine woke, so every controller starts afresh.
	rebaseline bool
}

func newControllers(d *Daemon) *controllers {
	return &controllers{
		d: d, runners: map[string]*linkRunner{}, rates: map[string]desired.Rates{}, engaged: map[string]bool{},
		reflectors: map[string][]netip.Addr{}, switchFailed: map[string]time.Time{},
	}
}

// current returns the runner of link when it is still generation gen.
func (c *controllers) current(link string, gen uint64) *linkRunner {
	if r := c.runners[link]; r != nil && r.gen == gen {
		return r
	}
	return nil
}

// carried is what a controller restarted on the same network takes over
// from the one it replaces.
type carried struct {
	// rates are the old controller's rates (controller rates, bit/s).
	rates desired.Rates
	cfg   tuning.Config
	// reflectors are the ones the old controller probed, which the new
	// one probes first (desired.ReflectorPool); rtts its replies' round trips.
	reflectors []netip.Addr
	rtts       *idlertt.Filter
}

// newRunner builds the controller of active link a (not started). With
// from (a restart on the same network: another key was edited, or the
// machine woke), a direction whose bounds and base rate are unchanged
// starts at the old controller's rate, and one whose bounds or base the
// user edited starts at its new base rate, not at the known-good rate.
// The returned Rates are the pipe rates the desired state carries for the
// new controller: the old pipe rate, the new base's, or 0 (Desired
// decides: known-good or policy).
func (c *controllers) newRunner(a desired.ActiveLink, mtu int, from *carried) (*linkRunner, desired.Rates, error) {
	d := c.d
	var pipes desired.Rates
	be := desired.BackendFactsOf(d.cfg.Backend.Info())
	cfg, err := desired.ControllerConfig(a.Policy, c.profile(a.ProfileKey), mtu, be)
	if err != nil {
		return nil, pipes, err
	}
	if from != nil {
		old := c.rates[a.Policy.Name]
		for _, dir := range shape.Directions {
			if !a.Policy.Shaper.Steers(dir) {
				continue // its rate is the policy's: Desired decides
			}
			dc, oc := cfg.Direction(dir), from.cfg.Direction(dir)
			rate, pipe := from.rates.Of(dir), old.Of(dir)
			if dc.Min == oc.Min && dc.Base == oc.Base && dc.Max == oc.Max && rate > 0 {
				dc.Start = rate
			} else {
				dc.Start, pipe = dc.Base, desired.ShaperRate(a.Policy, dc.Base, mtu, be.KernelOverhead)
			}
			pipes = pipes.With(dir, pipe)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), c.gen))
	var keep []netip.Addr
	rtts := idlertt.New(time.Now())
	if from != nil {
		keep = from.reflectors
		if from.rtts != nil {
			rtts = from.rtts
		}
	}
	var shuffle *rand.Rand
	if cfg.RandomizeReflectors {
		shuffle = rng
	}
	cfg.Reflectors, cfg.RandomizeReflectors = desired.ReflectorPool(cfg.Reflectors, cfg.Pingers, keep, shuffle), false
	ctl, err := controller.New(cfg, rng)
	if err != nil {
		return nil, pipes, err
	}
	c.gen++
	r := &linkRunner{
		d: d, gen: c.gen, name: a.Policy.Name, iface: a.Policy.Match.Interface, profileKey: a.ProfileKey,
		policy: a.Policy, mtu: mtu, cfg: cfg, initial: sortedAddrs(ctl.ActiveReflectors(nil)),
		probes: desired.Probes(a.Policy, c.profile(a.ProfileKey)), rtts: rtts,
	}
	var notes []string
	if d.cfg.Sensors == nil {
		notes = append(notes, d.cfg.SensorsNote)
	} else {
		if r.probe, err = d.cfg.Sensors.Probe(sensors.ProbeSpec{Link: r.name, Interface: r.iface, Interval: cfg.PingInterval, Probes: r.probes, Grid: d.grid}); err != nil {
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
			dc := cfg.Direction(dir)
			r.metrics.Direction(dir).SetRateBounds(dc.Min, dc.Max)
		}
	}
	return r, pipes, nil
}

// sync starts and stops controllers so that every active link of desire
// that is not paused has one built for its policy, network and MTU. A link whose policy or
// network changed, or every link after the machine woke, gets a fresh
// controller; on the same network it starts from the rates it had. A
// controller that cannot be built is noted in linkErrs. It returns the
// new runners (started by the caller once their shapers are installed),
// and whether the set changed.
func (c *controllers) sync(desire desired.Desire, mtu map[string]int, linkErrs map[string]string) (fresh []*linkRunner, changed bool) {
	want := map[string]desired.ActiveLink{}
	for _, a := range desire.Active {
		if a.Paused == "" {
			want[a.Policy.Name] = a
		}
	}
	for name := range c.rates {
		if _, ok := want[name]; !ok {
			delete(c.rates, name)
		}
	}
	carry := map[string]*carried{}
	for _, name := range slices.Sorted(maps.Keys(c.runners)) {
		r := c.runners[name]
		a, active := want[name]
		if active && !c.rebaseline && r.sameSpec(a, mtu[r.iface], desired.Probes(a.Policy, c.profile(a.ProfileKey))) {
			continue
		}
		c.saveProfiles([]*linkRunner{r})
		if active && a.ProfileKey == r.profileKey {
			st := r.loop.State()
			carry[name] = &carried{rates: desired.Rates{Upload: st.Upload.Rate, Download: st.Download.Rate}, cfg: r.cfg,
				reflectors: c.reflectors[name]}
			if slices.Equal(r.probes, desired.Probes(a.Policy, c.profile(a.ProfileKey))) {
				// The same path to the same reflectors: what its replies
				// measured still holds.
				carry[name].rtts = r.rtts
			}
		}
		c.stop(r)
		changed = true
	}
	c.rebaseline = false
	for _, a := range desire.Active {
		name := a.Policy.Name
		if c.runners[name] != nil || a.Paused != "" {
			continue
		}
		r, pipes, err := c.newRunner(a, mtu[a.Policy.Match.Interface], carry[name])
		c.rates[name] = pipes
		if err != nil {
			c.d.log.Error("cannot start the link's controller; its shaper keeps its rate", logging.KeyLink, name, logging.KeyError, err)
			linkErrs[name] = joinNote(linkErrs[name], "controller: "+err.Error())
			continue
		}
		c.runners[name] = r
		c.reflectors[name] = r.initial
		fresh = append(fresh, r)
		changed = true
	}
	return fresh, changed
}

// stop stops r and forgets it.
func (c *controllers) stop(r *linkRunner) {
	r.stop()
	if c.runners[r.name] == r {
		delete(c.runners, r.name)
		delete(c.reflectors, r.name)
		delete(c.engaged, r.name)
		delete(c.switchFailed, r.name)
	}
	if m := c.d.cfg.Metrics; m != nil {
		m.RemoveLink(r.name)
	}
}

// stopAll stops every controller (at shutdown).
func (c *controllers) stopAll() {
	for _, r := range c.runners {
		c.stop(r)
	}
}

// knownGood returns the rates of r's controller worth remembering for its
// network: for each direction it steers, with the shaper in place, after
// replies have arrived, that carries traffic without bufferbloat now. An
// idle direction proves nothing (it rests at its base rate), so it keeps
// what was known before; a fixed or off direction has no rate to learn.
func knownGood(r *linkRunner) (down, up int64) {
	st := r.loop.State()
	if !st.Shaping || st.Counters.Responses == 0 || st.Status == controller.StatusStalled {
		return 0, 0
	}
	sh := r.policy.Shaper
	if sh.Steers(shape.Download) && !st.Download.Bufferbloat && st.Download.Load != controller.LoadIdle {
		down = st.Download.Rate
	}
	if sh.Steers(shape.Upload) && !st.Upload.Bufferbloat && st.Upload.Load != controller.LoadIdle {
		up = st.Upload.Rate
	}
	return down, up
}

// saveKnownGood records every controller's known-good rates.
func (c *controllers) saveKnownGood() {
	rs := make([]*linkRunner, 0, len(c.runners))
	for _, name := range slices.Sorted(maps.Keys(c.runners)) {
		rs = append(rs, c.runners[name])
	}
	c.saveProfiles(rs)
}

// saveProfiles records the known-good rates of rs in the state file, in
// one write, when any of them is new.
func (c *controllers) saveProfiles(rs []*linkRunner) {
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
		p := c.profile(r.profileKey)
		if (down == 0 || down == p.GoodDownload) && (up == 0 || up == p.GoodUpload) {
			continue
		}
		ups = append(ups, update{r.profileKey, r.name, down, up})
	}
	if len(ups) == 0 {
		return
	}
	now := time.Now().UTC()
	err := c.d.cfg.Tokens.Update(func(st *state.State) {
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
		c.d.log.Error("saving the known-good rates", logging.KeyError, err)
	}
}

// Idle RTT learning: how the daemon keeps `queue = "auto"` sized for the
// path its controllers measure rather than for desired.DefaultIdleRTT.
const (
	// idleRTTResponses is how many replies a link's prober must have
	// delivered before its idle RTT (idlertt.Filter) counts. A figure taken
	// too early is too high, which only sizes a larger queue, and the
	// settled one replaces it once the drain time moves by a quarter
	// (idleRTTChange). Waiting for 100 kept the first seconds of every
	// new network on DefaultIdleRTT's 20 ms queue, which hands a dip in
	// the link's capacity 20 ms of the rate as a queue at the ISP.
	idleRTTResponses = 20
	// idleRTTEvery is how often the owner asks a steering controller for
	// its idle RTT after a rate change.
	idleRTTEvery = 5 * time.Second
	// idleRTTChange is how far (as a ratio) the auto queue's drain time
	// must move before a new idle RTT is recorded: the baseline wanders a
	// little all the time, and each recording costs a state-file write
	// and a reconcile.
	idleRTTChange = 1.25
)

// learnIdleRTT records in the state file the idle round trip that link's
// replies have measured (idlertt.Filter: replies only, a low percentile), when
// the profile of its network has none or one that sizes a different auto
// queue, and returns it (0 when it recorded nothing); the owner hands it
// to the hot path (reconciler.useIdleRTT). Without it an unmeasured network keeps DefaultIdleRTT's 20 ms queue on a path whose
// round trip is a fraction of a millisecond (issue 14), and the state file
// has no baseline after watch stops.
//
// The owner asks once the runner has seen idleRTTResponses replies (an
// idle link changes no rate), after a rate change (at most every
// idleRTTEvery), after every drift check (a link resting at its maximum
// changes no rate) and at shutdown; every means all but the rate change
// ask whatever the time.
func (c *controllers) learnIdleRTT(link string, now time.Time, every bool) time.Duration {
	r := c.runners[link]
	if r == nil || !r.policy.Shaper.Queue.Auto || (!every && now.Sub(r.idleCheckedAt) < idleRTTEvery) {
		return 0
	}
	measured, replies := r.rtts.Idle(now)
	if replies < idleRTTResponses || measured <= 0 {
		// Not yet: the next rate change asks again, so the first one
		// after enough replies records it, not one idleRTTEvery later.
		return 0
	}
	r.idleCheckedAt = now
	idle := max(measured, idlertt.Min)
	p := c.profile(r.profileKey)
	if p.IdleRTT > 0 {
		was, is := autoqueue.Drain(p.IdleRTT), autoqueue.Drain(idle)
		if float64(is) < idleRTTChange*float64(was) && float64(was) < idleRTTChange*float64(is) {
			return 0
		}
	}
	err := c.d.cfg.Tokens.Update(func(st *state.State) {
		if st.Profiles == nil {
			st.Profiles = map[string]state.Profile{}
		}
		p := st.Profiles[r.profileKey]
		p.Link, p.IdleRTT, p.UpdatedAt = r.name, idle, now.UTC()
		st.Profiles[r.profileKey] = p
	})
	if err != nil {
		c.d.log.Error("saving the measured idle RTT", logging.KeyLink, link, logging.KeyError, err)
		return 0
	}
	c.d.log.Info("measured the idle RTT; queue = \"auto\" follows it", logging.KeyLink, link, "idle_rtt", idle, "was", p.IdleRTT)
	return idle
}

// learnIdleRTTs is learnIdleRTT for every running controller; it returns
// the idle RTTs it recorded, by link.
func (c *controllers) learnIdleRTTs(now time.Time) map[string]time.Duration {
	learned := map[string]time.Duration{}
	for _, name := range slices.Sorted(maps.Keys(c.runners)) {
		if idle := c.learnIdleRTT(name, now, true); idle > 0 {
			learned[name] = idle
		}
	}
	return learned
}

// profile returns the state file's profile under key.
func (c *controllers) profile(key string) state.Profile {
	return c.d.cfg.Tokens.State.Profiles[key]
}
