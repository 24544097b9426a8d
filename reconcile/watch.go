// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/metrics"
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
)

// DaemonConfig is what a Daemon needs. ConfigDir, Settings, Backend,
// Tokens, Facts and Log are required.
type DaemonConfig struct {
	// ConfigDir is the policy directory; StateDir holds state.json.
	ConfigDir, StateDir string
	// LoadOptions are the policy files' load options (target, ownership).
	LoadOptions config.LoadOptions
	// Settings are the daemon settings, read once at start.
	Settings config.Daemon
	// Backend shapes; Tokens is the state file it shares with the daemon.
	Backend *OpenedBackend
	Tokens  *StateTokens
	// Facts delivers the network's state.
	Facts FactsWatcher
	// ConfigChanges signals (debounced) that the policy files may have
	// changed; nil means rely on the drift interval's re-read alone.
	ConfigChanges <-chan struct{}
	// Sensors measure the active links; nil runs no controllers (every
	// link then stays at its policy or known-good rate).
	Sensors Sensors
	// SensorsNote says why Sensors is nil, for status.
	SensorsNote string
	// Log is the daemon's logger; Metrics the optional Prometheus metrics.
	Log     *slog.Logger
	Metrics *metrics.Metrics
	// DriftInterval and SaveInterval: 0 means the defaults.
	DriftInterval, SaveInterval time.Duration
	// TeardownOnExit removes everything macake owns at shutdown instead of
	// leaving shaping in place for the next start.
	TeardownOnExit bool
	// MTU returns the MTU of the named interfaces; nil is InterfaceMTUs.
	MTU func(names []string) map[string]int
	// Version is reported by status.
	Version string
}

// Daemon is `macake watch`: it keeps the live shaping state matching the
// policy files and the network, repairs drift and runs one controller per
// active link.
//
// One goroutine (Run's) owns all state: it reads the policies, chooses the
// links, plans and applies, starts and stops the controllers, and carries
// out every controller decision as one SetRate. Everything else (the
// policy directory watch, the link facts watch, the timers, the
// controllers) only sends it events, and every event means "recompute from
// scratch" (level-triggered), except a rate decision, which is the
// controller's hot path: one pipe update, executed in order with the
// reconciles so that none can write a stale rate back.
type Daemon struct {
	cfg     DaemonConfig
	log     *slog.Logger
	ev      logging.Events
	started time.Time

	// Owned by the Run goroutine.
	lastGood map[string]config.Link // policies in force, by link name
	// lastGoodCopies keeps them on disk too, for the next start.
	lastGoodCopies *lastGoodStore
	inForce        map[string][]*config.Problem
	warnings       string
	facts          linkfacts.Facts
	haveFacts      bool
	factsErr       string
	mtu            map[string]int
	runners        map[string]*linkRunner
	rates          map[string]Rates
	engaged        map[string]bool
	reflectors     map[string][]netip.Addr
	switchFailed   map[string]time.Time
	live           shape.State // what was last applied (and rates set since)
	liveOK         bool        // live is known to be in place
	desire         Desire
	linkErrs       map[string]string
	activeIfaces   map[string]string // interface → active link
	matchedFacts   linkfacts.Facts   // the facts the last reconcile matched
	matchedOnce    bool
	hookErr        string
	rebaseline     bool
	gen            uint64
	driftCounts    map[string]int
	// unshaped holds, per link and direction, why the last plan could not
	// shape it (plan.Warning.Unshaped); status shows it instead of the
	// believed rate.
	unshaped   map[string]map[string]string
	lastApply  *applyRecord
	lastChange time.Time
	retry      *time.Timer
	backoff    time.Duration

	rateReqs   chan rateRequest
	switchReqs chan switchRequest
	reflReqs   chan reflectorNote
	measReqs   chan measurementRequest
	runCtx     context.Context
	stopped    chan struct{} // closed when Run returns

	pub     atomic.Pointer[published]
	pubLive atomic.Pointer[shape.State]
}

// NewDaemon checks cfg and returns a Daemon ready to Run.
func NewDaemon(cfg DaemonConfig) (*Daemon, error) {
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
		cfg.MTU = InterfaceMTUs
	}
	d := &Daemon{
		cfg: cfg, log: cfg.Log, ev: logging.Events{Log: cfg.Log},
		lastGood: map[string]config.Link{}, lastGoodCopies: newLastGoodStore(cfg.StateDir),
		inForce: map[string][]*config.Problem{},
		runners: map[string]*linkRunner{}, rates: map[string]Rates{}, engaged: map[string]bool{},
		reflectors: map[string][]netip.Addr{}, switchFailed: map[string]time.Time{},
		linkErrs: map[string]string{}, activeIfaces: map[string]string{}, driftCounts: map[string]int{},
		rateReqs: make(chan rateRequest), switchReqs: make(chan switchRequest), reflReqs: make(chan reflectorNote, 8),
		measReqs: make(chan measurementRequest), stopped: make(chan struct{}),
	}
	d.publish()
	return d, nil
}

// rateRequest is a controller decision on its way to the owner.
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
	d.log.Info("watch started", "pid", os.Getpid(), "version", d.cfg.Version, "config_dir", d.cfg.ConfigDir,
		"state_dir", d.cfg.StateDir, "backend", d.cfg.Backend.Name, "scope", d.cfg.Backend.Scope)

	facts := d.cfg.Facts.Watch(ctx)
	drift := time.NewTicker(d.cfg.DriftInterval)
	defer drift.Stop()
	save := time.NewTicker(d.cfg.SaveInterval)
	defer save.Stop()
	d.retry = time.NewTimer(time.Hour)
	d.retry.Stop()
	configCh := d.cfg.ConfigChanges
	d.loadConfig(step)
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
		case <-d.retry.C:
			d.pass(step, "retry")
		case <-save.C:
			d.saveKnownGood()
		case req := <-d.rateReqs:
			req.reply <- d.setRate(step, req)
		case req := <-d.switchReqs:
			req.reply <- d.switchShaper(step, req)
		case req := <-d.measReqs:
			req.reply <- d.recordMeasurement(step, req)
		case n := <-d.reflReqs:
			if r := d.runners[n.link]; r != nil && r.gen == n.gen {
				d.reflectors[n.link] = n.addrs
				d.pass(step, "reflectors")
			}
		}
	}
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
func (d *Daemon) onFacts(ctx context.Context, ev FactsEvent) string {
	if ev.Woke {
		d.ev.SystemWake(ctx, ev.Slept)
		// Baselines and counters from before the sleep mean nothing now:
		// every controller starts afresh (at its current rates).
		d.rebaseline = true
	}
	if ev.Err != nil {
		if msg := ev.Err.Error(); msg != d.factsErr {
			d.factsErr = msg
			d.log.Error("cannot read the link facts; keeping the links as they are", logging.KeyError, ev.Err)
			d.publish()
		}
		if ev.Woke && d.haveFacts {
			return "wake"
		}
		return ""
	}
	if d.factsErr != "" {
		d.log.Info("link facts readable again")
		d.factsErr = ""
	}
	d.facts, d.haveFacts = ev.Facts, true
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
	d.saveKnownGood()
	for _, r := range d.runners {
		d.stopRunner(r)
	}
	if !d.cfg.TeardownOnExit {
		d.log.Info("watch stopped; shaping left in place (macake down removes it)")
		return nil
	}
	start := time.Now()
	p, err := d.cfg.Backend.Teardown(ctx)
	res := logging.ApplyResult{Trigger: "shutdown", Plan: p, Applied: len(p.Ops), Duration: time.Since(start), Err: err}
	for _, op := range p.Ops {
		d.ev.Change(ctx, op, nil)
	}
	d.ev.Apply(ctx, res)
	if err != nil {
		d.log.Error("teardown at exit failed; run 'macake down'", logging.KeyError, err)
		return fmt.Errorf("teardown at exit: %w", err)
	}
	if err := d.cfg.Tokens.Update(func(st *state.State) { st.Slots, st.PFToken = nil, "" }); err != nil {
		d.log.Error("saving the state file after teardown", logging.KeyError, err)
	}
	d.log.Info("watch stopped; shaping removed (--teardown-on-exit)")
	return nil
}

// setRate carries out one controller decision: the pipe of that direction
// gets the controller's rate (with the queue that goes with it), by one
// backend.SetRate. The rate becomes part of the desired state first, so
// that the next reconcile keeps it even if this update fails.
func (d *Daemon) setRate(ctx context.Context, req rateRequest) error {
	r := d.runners[req.link]
	if r == nil || r.gen != req.gen {
		return errStaleController
	}
	rates := d.rates[req.link]
	if req.dir == shape.Upload {
		rates.Upload = req.rate
	} else {
		rates.Download = req.rate
	}
	d.rates[req.link] = rates
	i := d.liveIndex(req.link)
	if i < 0 || !d.liveOK {
		return errNotInstalled
	}
	l := d.live.Links[i]
	dr, err := directionRate(r.policy, req.dir, d.profile(r.profileKey), req.rate, d.mtuOf(l.Interface), d.cfg.Backend.KernelOverhead)
	if err != nil {
		return err
	}
	if l.Pipe(req.dir) == dr.Pipe {
		return nil
	}
	if err := d.cfg.Backend.SetRate(ctx, l, req.dir, dr.Pipe); err != nil {
		return err
	}
	d.live.Links[i] = withPipe(l, req.dir, dr.Pipe)
	d.publishLive()
	return nil
}

var (
	errStaleController = errors.New("the link's controller was replaced")
	errNotInstalled    = errors.New("the link's shaper is not installed (yet)")
)

// switchShaper engages or releases a balanced link's shaper: the link's
// desired state changes and a reconcile installs or removes it.
func (d *Daemon) switchShaper(ctx context.Context, req switchRequest) error {
	r := d.runners[req.link]
	if r == nil || r.gen != req.gen {
		return errStaleController
	}
	if t, ok := d.switchFailed[req.link]; ok && time.Since(t) < engageRetry && d.engaged[req.link] == req.engage {
		return fmt.Errorf("the last attempt failed %s ago; retrying shortly", time.Since(t).Round(time.Second))
	}
	d.engaged[req.link] = req.engage
	trigger := "release"
	if req.engage {
		trigger = "engage"
		d.rates[req.link] = Rates{Upload: req.upBits, Download: req.dnBits}
	}
	d.pass(ctx, trigger)
	if d.lastApply != nil && d.lastApply.err != nil {
		d.switchFailed[req.link] = time.Now()
		return d.lastApply.err
	}
	if d.hookErr != "" && req.engage {
		d.switchFailed[req.link] = time.Now()
		return errors.New(d.hookErr)
	}
	delete(d.switchFailed, req.link)
	return nil
}

func (d *Daemon) liveIndex(link string) int {
	for i, l := range d.live.Links {
		if l.Name == link {
			return i
		}
	}
	return -1
}

// mtuOf is the interface's MTU as the last reconcile read it (0:
// unknown, which Desired and the queue sizing take as the default).
func (d *Daemon) mtuOf(iface string) int { return d.mtu[iface] }

// with returns r with direction d's rate replaced.
func (r Rates) with(d shape.Direction, bits int64) Rates {
	if d == shape.Upload {
		r.Upload = bits
	} else {
		r.Download = bits
	}
	return r
}

// withPipe returns l with direction dir's shaper replaced.
func withPipe(l shape.Link, dir shape.Direction, p shape.Pipe) shape.Link {
	if dir == shape.Upload {
		l.Upload = p
	} else {
		l.Download = p
	}
	return l
}

// profile returns the state file's profile under key.
func (d *Daemon) profile(key string) state.Profile {
	return d.cfg.Tokens.State.Profiles[key]
}
