// SPDX-License-Identifier: Apache-2.0

// Package daemon is `macake watch`: the loop that keeps the live shaping
// matching the policy files and the network, repairs drift and runs one
// controller per active link.
//
// The loop (Daemon.Run) owns all state and is the only goroutine that
// changes it. It is split along controller-runtime's lines: the loop
// receives events and owns the timers; the policies in force (policySet)
// and the network facts are its inputs; the reconciler runs one
// reconcile.Pass per trigger and remembers what the passes learnt; the
// controllers (one linkRunner per active link) only send the loop
// requests. Every event means "recompute from scratch" (level-triggered),
// except a rate decision, which is the controller's hot path: one pipe
// update, carried out in order with the passes so that none can write a
// stale rate back.
//
// Serve is the whole command around the loop: it assembles the logger,
// the state lock, the state file, the backend, the link facts, the
// metrics endpoint and the status socket, so the CLI only parses flags.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/daemon/boundsadvice"
	"github.com/macake/macake/daemon/history"
	"github.com/macake/macake/daemon/mqtt"
	"github.com/macake/macake/daemon/pauses"
	"github.com/macake/macake/daemon/sensors"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/internal/tickgrid"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// Defaults of the daemon's timers.
const (
	// DefaultDriftInterval is how often watch re-reads everything and
	// re-observes pf/dummynet to repair drift (five read-only commands when
	// nothing changed).
	DefaultDriftInterval = 30 * time.Second
	// DefaultSaveInterval is how often the controllers' known-good rates
	// are written to the state file while they run (also at every link
	// change and at shutdown).
	DefaultSaveInterval = 5 * time.Minute
	// engageRetry is the least time between two reconciles for a balanced
	// controller's engage or release that failed: the controller asks
	// again on every sample.
	engageRetry = 5 * time.Second
	// repairDelay is how soon after a failed rate change a pass reads
	// the live state and repairs it: soon, but not in the same breath, so
	// a burst of failing decisions costs one pass.
	repairDelay = time.Second
)

// Config is what a Daemon needs. ConfigDir, Backend, Tokens, Facts and
// Log are required.
type Config struct {
	// ConfigDir is the policy directory; StateDir holds state.json.
	ConfigDir, StateDir string
	// LoadOptions are the policy files' load options (target, ownership).
	LoadOptions config.LoadOptions
	// Settings are the daemon settings, read once at start.
	Settings settings.Daemon
	// Backend shapes; Tokens is the state file it shares with the daemon.
	Backend backend.Backend
	Tokens  *state.File
	// Facts delivers the network's state.
	Facts sensors.FactsWatcher
	// ConfigChanges signals (debounced) that the policy files may have
	// changed; nil means rely on the drift interval's re-read alone.
	ConfigChanges <-chan struct{}
	// Sensors measure the active links; nil runs no controllers (every
	// link then stays at its policy or known-good rate).
	Sensors sensors.Opener
	// SensorsNote says why Sensors is nil, for status.
	SensorsNote string
	// Log is the daemon's logger; Metrics the optional Prometheus metrics.
	// LogFile is the file Log writes to, "" for standard error, for status.
	Log     *slog.Logger
	LogFile string
	Metrics *metrics.Metrics
	// Events keeps the log's last lines for status requests that ask for
	// them (the status page); nil lists none.
	Events *logging.Recent
	// DriftInterval and SaveInterval: 0 means the defaults.
	DriftInterval, SaveInterval time.Duration
	// TeardownOnExit removes everything macake owns at shutdown instead of
	// leaving shaping in place for the next start.
	TeardownOnExit bool
	// MTU returns the MTU of the named interfaces; nil is
	// linkfacts.MTUs.
	MTU func(names []string) map[string]int
	// Version is reported by status.
	Version string
	// MQTTDial opens the MQTT publisher's connection in place of the
	// network (tests); nil dials the broker of Settings.MQTT.
	MQTTDial func(broker *url.URL) (net.Conn, error)
}

// Daemon is `macake watch` (see the package comment).
type Daemon struct {
	cfg     Config
	log     *slog.Logger
	ev      logging.Events
	started time.Time

	// Owned by the Run goroutine.
	policies *policySet
	net      network
	ctls     *controllers
	rec      *reconciler
	retry    *time.Timer

	rateReqs   chan rateRequest
	switchReqs chan switchRequest
	reflReqs   chan reflectorNote
	idleReqs   chan linkNote
	measReqs   chan measurementRequest
	pauseReqs  chan pauseRequest
	// pauses are the pauses of the shaping in force, by link
	// (state.AllLinks: every link), as the state file keeps them.
	pauses pauses.Leases
	// pauseLimit bounds how many pause and resume requests reach the loop.
	pauseLimit pauses.Limiter
	runCtx     context.Context
	stopped    chan struct{} // closed when Run returns

	pub     atomic.Pointer[published]
	pubLive atomic.Pointer[shape.State]

	// stats and hist are read and written from several goroutines under
	// their own locks: the shapers' counters, the links' recent samples.
	stats shaperStats
	hist  history.Links
	// bounds are the active links' last hour at their bounds, for the
	// advice status gives.
	bounds boundsadvice.Tracker

	// grid is where every periodic timer of the daemon's links fires
	// (counter reads, probe sends, controller ticks, history), so that
	// timers whose periods meet cost one wake-up.
	grid tickgrid.Grid
}

// network is the link facts as the loop last received them.
type network struct {
	facts linkfacts.Facts
	have  bool
	// err is the last error reading them, "" while they read.
	err string
}

// New checks cfg and returns a Daemon ready to Run.
func New(cfg Config) (*Daemon, error) {
	switch {
	case cfg.ConfigDir == "":
		return nil, errors.New("watch: no policy directory")
	case cfg.Backend == nil || cfg.Tokens == nil:
		return nil, errors.New("watch: no backend or state")
	case cfg.Facts == nil:
		return nil, errors.New("watch: no link facts source")
	case cfg.Log == nil:
		return nil, errors.New("watch: no logger")
	}
	if cfg.DriftInterval <= 0 {
		cfg.DriftInterval = DefaultDriftInterval
	}
	if cfg.SaveInterval <= 0 {
		cfg.SaveInterval = DefaultSaveInterval
	}
	if cfg.MTU == nil {
		cfg.MTU = linkfacts.MTUs
	}
	d := &Daemon{
		cfg: cfg, log: cfg.Log, ev: logging.Events{Log: cfg.Log},
		rateReqs: make(chan rateRequest), switchReqs: make(chan switchRequest), reflReqs: make(chan reflectorNote, 8), idleReqs: make(chan linkNote, 8),
		measReqs: make(chan measurementRequest), pauseReqs: make(chan pauseRequest), stopped: make(chan struct{}),
		grid: tickgrid.New(time.Now()), pauses: pauses.Leases{},
	}
	d.policies = newPolicySet(&d.cfg, d.log, d.ev)
	d.ctls = newControllers(d)
	d.rec = newReconciler(&d.cfg, d.log, d.ev)
	d.publish()
	return d, nil
}

// rateRequest is a controller decision on its way to the loop.
type rateRequest struct {
	link  string
	gen   uint64
	dir   shape.Direction
	rate  int64
	reply chan error
}

// switchRequest is a balanced controller engaging (with its pipe rates)
// or releasing the shaper.
type switchRequest struct {
	link           string
	gen            uint64
	engage         bool
	upBits, dnBits int64
	reply          chan error
}

// reflectorNote says that a controller probes other reflectors now, whose
// ICMP must be exempt from shaping.
type reflectorNote struct {
	link  string
	gen   uint64
	addrs []netip.Addr
}

// linkNote says that the controller of generation gen on link has
// replies enough for its idle RTT to be recorded (linkRunner.follow).
type linkNote struct {
	link string
	gen  uint64
}

// measurementRequest is a measurement handed to the daemon (by `macake
// measure`, over the status socket) to record in the state file.
type measurementRequest struct {
	key     string
	profile state.Profile
	reply   chan error
}

// Run is the daemon: it reconciles at start (once the link facts are
// known) and on every event until ctx ends, then shuts down: it finishes
// the step in progress, stops the controllers, saves the state file, and
// leaves shaping in place (or tears it down with TeardownOnExit). It
// returns nil after a clean shutdown; the error of a failed teardown
// otherwise.
func (d *Daemon) Run(ctx context.Context) error {
	d.started = time.Now()
	defer close(d.stopped)
	// Steps finish even when ctx ends mid-way: a half-applied plan is
	// safe, but finishing it is better, and commands have their own
	// timeouts.
	step := context.WithoutCancel(ctx)
	runCtx, cancelRunners := context.WithCancel(step)
	defer cancelRunners()
	d.runCtx = runCtx
	var recorder sync.WaitGroup
	recorder.Go(func() { d.recordHistory(runCtx) })
	defer recorder.Wait()
	if m := d.cfg.Settings.MQTT; m.Enabled() {
		// Beside the loop, never on it: it reads the published status
		// and pauses through SetPause, like any other client. It says
		// offline once the shutdown is done.
		recorder.Go(func() {
			mqtt.Run(runCtx, mqtt.Options{Settings: m, Daemon: d, Log: d.log, Version: d.cfg.Version, Dial: d.cfg.MQTTDial})
		})
	}
	defer cancelRunners()
	info := d.cfg.Backend.Info()
	d.log.Info("watch started", "pid", os.Getpid(), "version", d.cfg.Version, "config_dir", d.cfg.ConfigDir,
		"state_dir", d.cfg.StateDir, "backend", info.Name, "scope", info.Scope)

	facts := d.cfg.Facts.Watch(ctx)
	drift := time.NewTicker(d.cfg.DriftInterval)
	defer drift.Stop()
	save := time.NewTicker(d.cfg.SaveInterval)
	defer save.Stop()
	d.retry = time.NewTimer(time.Hour)
	d.retry.Stop()
	pauseEnd := time.NewTimer(time.Hour)
	pauseEnd.Stop()
	d.loadPauses(time.Now())
	d.armPauseEnd(pauseEnd, time.Now())
	configCh := d.cfg.ConfigChanges
	d.policies.load(step)
	d.publish()

	for {
		select {
		case <-ctx.Done():
			return d.shutdown(step)
		case ev, ok := <-facts:
			if !ok {
				facts = nil
				continue
			}
			if trigger := d.onFacts(step, ev); trigger != "" {
				d.pass(step, trigger)
			}
		case _, ok := <-configCh:
			if !ok {
				configCh = nil
				continue
			}
			d.pass(step, "config")
		case <-drift.C:
			d.pass(step, "drift")
			d.refreshStats(step, 0)
			for link, idle := range d.ctls.learnIdleRTTs(time.Now()) {
				d.rec.useIdleRTT(link, idle)
			}
		case <-d.retry.C:
			d.pass(step, "retry")
		case <-save.C:
			d.ctls.saveKnownGood()
		case req := <-d.rateReqs:
			req.reply <- d.setRate(step, req)
			if idle := d.ctls.learnIdleRTT(req.link, time.Now(), false); idle > 0 {
				d.rec.useIdleRTT(req.link, idle)
			}
		case req := <-d.switchReqs:
			req.reply <- d.switchShaper(step, req)
		case req := <-d.measReqs:
			req.reply <- d.recordMeasurement(step, req)
		case req := <-d.pauseReqs:
			req.reply <- d.setPause(step, req, pauseEnd)
		case <-pauseEnd.C:
			d.pauseEnded(step, pauseEnd)
		case n := <-d.reflReqs:
			if d.ctls.current(n.link, n.gen) != nil {
				d.ctls.reflectors[n.link] = n.addrs
				d.pass(step, triggerReflectors)
			}
		case n := <-d.idleReqs:
			if d.ctls.current(n.link, n.gen) == nil {
				continue
			}
			if idle := d.ctls.learnIdleRTT(n.link, time.Now(), true); idle > 0 {
				// A pass installs the queue now: an idle link changes no
				// rate that could carry it.
				d.rec.useIdleRTT(n.link, idle)
				d.pass(step, "idle-rtt")
			}
		}
	}
}

// pass is one level-triggered reconcile: re-read the policy files, then
// (once the network is known) let the reconciler match them, (re)start
// the controllers and apply; whatever triggered it, it recomputes
// everything. A failure schedules a retry.
func (d *Daemon) pass(ctx context.Context, trigger string) {
	d.policies.load(ctx)
	if !d.net.have {
		d.publish()
		return
	}
	links := d.policies.links()
	// A paused link stays active but installs nothing, and its
	// controller stops (saving what it learnt) until the pause ends.
	paused := d.pauses.Paused(time.Now(), links)
	fresh, liveChanged := d.rec.pass(ctx, trigger, links, paused, d.net.facts, d.ctls)
	if liveChanged {
		d.publishLive()
	}
	if delay := d.rec.retryAfter(); delay > 0 {
		d.retry.Reset(delay)
	}
	for _, r := range fresh {
		if r.started || d.ctls.runners[r.name] != r {
			continue
		}
		l, _ := d.rec.live.Link(r.name)
		r.start(d.runCtx, l)
	}
	d.publish()
}

// TakeMeasurement records a profile that `macake measure` measured on the
// network key and returns once the state file holds it. While the daemon
// runs it holds the state lock, so it writes the measurement itself
// (measure cannot); a reconcile follows at once, so that an "auto" rate
// uses it. Safe to call from any goroutine; it fails when the daemon has
// stopped or ctx ends first.
func (d *Daemon) TakeMeasurement(ctx context.Context, key string, p state.Profile) error {
	req := measurementRequest{key: key, profile: p, reply: make(chan error, 1)}
	select {
	case d.measReqs <- req:
	case <-d.stopped:
		return errors.New("macake watch is stopping")
	case <-ctx.Done():
		return fmt.Errorf("macake watch is busy: %w", ctx.Err())
	}
	return <-req.reply
}

// recordMeasurement saves a handed-in measurement and reconciles.
func (d *Daemon) recordMeasurement(ctx context.Context, req measurementRequest) error {
	if err := d.cfg.Tokens.Update(func(st *state.State) { st.RecordMeasurement(req.key, req.profile) }); err != nil {
		d.log.Error("saving a measurement", "profile", req.key, logging.KeyError, err)
		return fmt.Errorf("saving the measurement: %w", err)
	}
	p := req.profile
	d.log.Info("took in a measurement", "profile", req.key, "download_bps", p.DownloadCapacity, "upload_bps", p.UploadCapacity, "idle_rtt", p.IdleRTT)
	d.pass(ctx, "measurement")
	return nil
}

// onFacts takes in a facts event and returns the trigger of the pass it
// calls for, or "".
func (d *Daemon) onFacts(ctx context.Context, ev sensors.FactsEvent) string {
	if ev.Woke {
		d.ev.SystemWake(ctx, ev.Slept)
		// Baselines and counters from before the sleep mean nothing now:
		// every controller starts afresh (at its current rates).
		d.ctls.rebaseline = true
	}
	if ev.Err != nil {
		if msg := ev.Err.Error(); msg != d.net.err {
			d.net.err = msg
			d.log.Error("cannot read the link facts; keeping the links as they are", logging.KeyError, ev.Err)
			d.publish()
		}
		if ev.Woke && d.net.have {
			return "wake"
		}
		return ""
	}
	if d.net.err != "" {
		d.log.Info("link facts readable again")
		d.net.err = ""
	}
	d.net.facts, d.net.have = ev.Facts, true
	switch {
	case ev.Woke:
		return "wake"
	case ev.Reason == "start":
		return "start"
	}
	return "link_change"
}

// shutdown stops the controllers, saves their known-good rates and, with
// TeardownOnExit, removes everything macake owns.
func (d *Daemon) shutdown(ctx context.Context) error {
	d.log.Info("watch stopping")
	d.ctls.learnIdleRTTs(time.Now())
	d.ctls.saveKnownGood()
	d.ctls.stopAll()
	if !d.cfg.TeardownOnExit {
		d.log.Info("watch stopped; shaping left in place (macake down removes it)")
		return nil
	}
	out := reconcile.Teardown(ctx, reconcile.Run{Backend: d.cfg.Backend, Store: d.cfg.Tokens, Do: reconcile.ApplyPlan})
	if out.Step == reconcile.StepRelease {
		d.log.Error("saving the state file after teardown", logging.KeyError, out.Err)
		out.Err = nil
	}
	for _, op := range out.Applied.Ops {
		d.ev.Change(ctx, op, nil)
	}
	d.ev.Apply(ctx, logging.ApplyResult{Trigger: "shutdown", Plan: out.Plan, Applied: len(out.Plan.Ops), Duration: out.Took, Err: out.Err})
	if out.Err != nil {
		d.log.Error("teardown at exit failed; run 'macake down'", logging.KeyError, out.Err)
		return fmt.Errorf("teardown at exit: %w", out.Err)
	}
	d.log.Info("watch stopped; shaping removed (--teardown-on-exit)")
	return nil
}

var (
	errStaleController = errors.New("the link's controller was replaced")
	errNotInstalled    = errors.New("the link's shaper is not installed (yet)")
)

// setRate carries out one controller decision: the pipe of that direction
// gets the controller's rate (with the queue that goes with it), by one
// backend SetRate. The rate becomes part of the desired state first, so
// that the next reconcile keeps it even if this update fails.
func (d *Daemon) setRate(ctx context.Context, req rateRequest) error {
	if d.ctls.current(req.link, req.gen) == nil {
		return errStaleController
	}
	d.ctls.rates[req.link] = d.ctls.rates[req.link].With(req.dir, req.rate)
	if err := d.rec.setRate(ctx, req.link, req.dir, req.rate); err != nil {
		if !errors.Is(err, errNotInstalled) && ctx.Err() == nil {
			// The shaper is not what the daemon believes (deleted under
			// it, a writer that died or hung): the live state is in doubt
			// until a pass has read it, and one soon repairs it.
			d.rec.liveOK = false
			d.retry.Reset(max(d.rec.backoff, repairDelay))
		}
		return err
	}
	d.publishLive()
	return nil
}

// switchShaper engages or releases a balanced link's shaper: the link's
// desired state changes and a reconcile installs or removes it.
func (d *Daemon) switchShaper(ctx context.Context, req switchRequest) error {
	c := d.ctls
	if c.current(req.link, req.gen) == nil {
		return errStaleController
	}
	if t, ok := c.switchFailed[req.link]; ok && time.Since(t) < engageRetry && c.engaged[req.link] == req.engage {
		return fmt.Errorf("the last attempt failed %s ago; retrying shortly", time.Since(t).Round(time.Second))
	}
	c.engaged[req.link] = req.engage
	trigger := "release"
	if req.engage {
		trigger = "engage"
		c.rates[req.link] = desired.Rates{Upload: req.upBits, Download: req.dnBits}
	}
	d.pass(ctx, trigger)
	if a := d.rec.lastApply; a != nil && a.err != nil {
		c.switchFailed[req.link] = time.Now()
		return a.err
	}
	if d.rec.hookErr != "" && req.engage {
		c.switchFailed[req.link] = time.Now()
		return errors.New(d.rec.hookErr)
	}
	delete(c.switchFailed, req.link)
	return nil
}
