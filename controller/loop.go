// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
)

// RateSetter applies one direction's pipe rate: the controller's hot path
// (one `dnctl pipe N config …` on a Mac). Both decisions of one Output
// are one update; the Loop sends them back to back, download first.
type RateSetter interface {
	SetRate(ctx context.Context, dir shape.Direction, rateBits int64) error
}

// ShaperSwitch is implemented by a RateSetter that can install and remove
// the shaper, for balanced mode. Engage installs it at the given pipe
// rates; Release removes it. Without it, balanced mode only reports
// engage/release as events and sends rates through SetRate.
type ShaperSwitch interface {
	Engage(ctx context.Context, uploadBits, downloadBits int64) error
	Release(ctx context.Context) error
}

// LoopConfig wires a Controller to its inputs and its backend.
type LoopConfig struct {
	// Controller is the core to drive; required.
	Controller *Controller
	// Setter applies decisions; required.
	Setter RateSetter
	// Delays and Loads are the input streams (prober, counter sampler).
	// Run returns when both are closed (or nil) and the context is done,
	// or when both have been closed.
	Delays <-chan DelaySample
	Loads  <-chan LoadSample
	// Now is the clock; nil means time.Now (which testing/synctest fakes).
	Now func() time.Time
	// TickInterval is how often Tick runs when nothing else arrives, so a
	// stall is noticed without input; 0 means the stall timeout.
	TickInterval time.Duration
	// OnEvent, if set, hears every event (log it with Event.String).
	OnEvent func(Event)
	// OnApply, if set, hears every decision sent to the Setter and its result.
	OnApply func(Decision, error)
	// OnError, if set, hears failures to engage or release the shaper.
	OnError func(error)
}

// Loop runs a Controller: it serialises the inputs, stamps them with the
// clock and applies the decisions. Its State, ProbePlan and ProbeChanges
// methods are safe to call from other goroutines while Run runs.
type Loop struct {
	cfg     LoopConfig
	now     func() time.Time
	tick    time.Duration
	changes chan struct{}

	mu             sync.Mutex
	c              *Controller
	lastGen        uint64
	engagedApplied bool
}

// NewLoop checks cfg and returns a Loop ready to Run.
func NewLoop(cfg LoopConfig) (*Loop, error) {
	if cfg.Controller == nil {
		return nil, errors.New("controller loop: no controller")
	}
	if cfg.Setter == nil {
		return nil, errors.New("controller loop: no rate setter")
	}
	if cfg.TickInterval < 0 {
		return nil, fmt.Errorf("controller loop: tick interval %v is negative", cfg.TickInterval)
	}
	l := &Loop{cfg: cfg, c: cfg.Controller, now: cfg.Now, tick: cfg.TickInterval, changes: make(chan struct{}, 1)}
	if l.now == nil {
		l.now = time.Now
	}
	if l.tick == 0 {
		l.tick = max(CadenceOf(l.c.cfg).StallTimeout, time.Millisecond)
	}
	return l, nil
}

// Run is NewLoop followed by Loop.Run.
func Run(ctx context.Context, cfg LoopConfig) error {
	l, err := NewLoop(cfg)
	if err != nil {
		return err
	}
	return l.Run(ctx)
}

// Run starts the controller and processes inputs until ctx is done
// (returning ctx.Err()) or both input channels are closed (returning nil).
// Decisions are applied synchronously, in order, so a slow backend delays
// later samples; the stale-response guard then keeps old samples out of
// the rate law, as upstream.
//
// A driver that has its own event loop (the daemon reads the prober and
// the counters itself, so that a sample reaches the controller without a
// goroutine hand-off) calls Start, Delay, Load and Tick instead, from one
// goroutine.
func (l *Loop) Run(ctx context.Context) error {
	l.Start(ctx)
	ticker := time.NewTicker(l.tick)
	defer ticker.Stop()
	delays, loads := l.cfg.Delays, l.cfg.Loads
	for {
		if delays == nil && loads == nil && (l.cfg.Delays != nil || l.cfg.Loads != nil) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case s, ok := <-delays:
			if !ok {
				delays = nil
				continue
			}
			l.Delay(ctx, s)
		case s, ok := <-loads:
			if !ok {
				loads = nil
				continue
			}
			l.Load(ctx, s)
		case <-ticker.C:
			l.Tick(ctx)
		}
	}
}

// Start starts the controller and applies its first decisions; call it
// once, before any other input.
func (l *Loop) Start(ctx context.Context) {
	l.mu.Lock()
	out := l.c.Start(l.now())
	l.mu.Unlock()
	l.handle(ctx, &out)
}

// Delay feeds one delay sample, stamped with the clock, and applies what
// the controller decides.
func (l *Loop) Delay(ctx context.Context, s DelaySample) {
	l.mu.Lock()
	out := l.c.Delay(l.now(), s)
	l.mu.Unlock()
	l.handle(ctx, &out)
}

// Load feeds one load sample, as Delay does.
func (l *Loop) Load(ctx context.Context, s LoadSample) {
	l.mu.Lock()
	out := l.c.Load(l.now(), s)
	l.mu.Unlock()
	l.handle(ctx, &out)
}

// Tick lets the controller notice time passing without input (a stall);
// a driver calls it every TickInterval.
func (l *Loop) Tick(ctx context.Context) {
	l.mu.Lock()
	out := l.c.Tick(l.now())
	l.mu.Unlock()
	l.handle(ctx, &out)
}

// TickInterval is how often Tick should run (LoopConfig.TickInterval, or
// the stall timeout).
func (l *Loop) TickInterval() time.Duration { return l.tick }

// handle reports events, reconciles the balanced-mode switch and applies
// the decisions.
func (l *Loop) handle(ctx context.Context, out *Output) {
	for _, e := range out.Events() {
		if l.cfg.OnEvent != nil {
			l.cfg.OnEvent(e)
		}
	}

	l.mu.Lock()
	want := l.c.Engaged()
	st := l.c.cfg.Mode
	gen := l.c.ProbeGeneration()
	var upBits, downBits int64
	if want {
		upBits = l.c.pipeRateOf(&l.c.dir[shape.Upload], l.c.dir[shape.Upload].rate) * 1000
		downBits = l.c.pipeRateOf(&l.c.dir[shape.Download], l.c.dir[shape.Download].rate) * 1000
	}
	l.mu.Unlock()

	switched := false
	sw, hasSwitch := l.cfg.Setter.(ShaperSwitch)
	if st == tuning.ModeBalanced && hasSwitch && want != l.engagedApplied {
		var err error
		if want {
			err = sw.Engage(ctx, upBits, downBits)
		} else {
			err = sw.Release(ctx)
		}
		if err == nil {
			l.engagedApplied, switched = want, want
		} else if l.cfg.OnError != nil {
			verb := map[bool]string{true: "engage", false: "release"}[want]
			l.cfg.OnError(fmt.Errorf("%s shaper: %w", verb, err))
		}
	}
	missing := st == tuning.ModeBalanced && hasSwitch && want && !l.engagedApplied

	for _, d := range out.Decisions() {
		var err error
		switch {
		case missing:
			err = errors.New("shaper not engaged")
		case switched && d.Reason == ReasonEngage:
			// Engage already installed the pipes at these rates.
		default:
			err = l.cfg.Setter.SetRate(ctx, d.Direction, d.Rate)
		}
		l.mu.Lock()
		l.c.ReportApply(d.Direction, err)
		l.mu.Unlock()
		if l.cfg.OnApply != nil {
			l.cfg.OnApply(d, err)
		}
	}

	if gen != l.lastGen {
		l.lastGen = gen
		select {
		case l.changes <- struct{}{}:
		default:
		}
	}
}

// State returns the controller's snapshot.
func (l *Loop) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.State()
}

// ProbePlan is what the prober needs from the controller.
type ProbePlan struct {
	// Reflectors to probe, one per active slot, round-robin.
	Reflectors []netip.Addr
	// Paused is true while the controller sleeps: stop probing.
	Paused bool
	// Generation changes whenever the plan changes or probes should be
	// restarted (even with the same reflectors).
	Generation uint64
}

// ProbePlan returns the current probe plan.
func (l *Loop) ProbePlan() ProbePlan {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ProbePlan{
		Reflectors: l.c.ActiveReflectors(nil),
		Paused:     l.c.ProbingPaused(),
		Generation: l.c.ProbeGeneration(),
	}
}

// ProbeChanges receives a value (coalesced) whenever ProbePlan changes;
// the prober selects on it and then calls ProbePlan.
func (l *Loop) ProbeChanges() <-chan struct{} { return l.changes }
