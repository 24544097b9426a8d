// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/daemon/linkchanges"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/shape"
)

// reconciler is the daemon's half that works out and applies the desired
// state: one reconcile.Pass per trigger, and what the passes learn between
// them (what is live, which links failed, whether pf lost its hook line).
// It carries out the controllers' decisions on what it knows is live.
type reconciler struct {
	cfg *Config
	log *slog.Logger
	ev  logging.Events
	// quiet logs a pass's changes at Debug: a pass that only follows a
	// controller's reflector replacement, which its own line tells.
	quiet logging.Events

	mtu      map[string]int
	live     shape.State // what was last applied (and rates set since)
	liveOK   bool        // live is known to be in place
	desire   desired.Desire
	linkErrs map[string]string
	hookErr  string
	// unshaped holds, per link and direction, why the last plan could not
	// shape it (plan.Warning.Unshaped); status shows it instead of the
	// believed rate.
	unshaped    map[string]map[string]string
	lastApply   *applyRecord
	lastChange  time.Time
	driftCounts map[string]int
	changes     linkchanges.Log
	// backoff is the delay before the retry of a failed pass; retryIn is
	// what the last pass asks for (0: no retry).
	backoff, retryIn time.Duration
}

func newReconciler(cfg *Config, log *slog.Logger, ev logging.Events) *reconciler {
	return &reconciler{cfg: cfg, log: log, ev: ev, quiet: quietEvents(log), linkErrs: map[string]string{}, driftCounts: map[string]int{},
		changes: linkchanges.New(ev, cfg.Metrics)}
}

// triggerReflectors is the trigger of a pass that follows a controller's
// reflector replacement: it changes the probe exemptions only, and its
// lines go to the log at Debug (reconciler.quiet).
const triggerReflectors = "reflectors"

// applyRecord is the outcome of the last reconcile, for status.
type applyRecord struct {
	at      time.Time
	trigger string
	plan    plan.Plan
	applied int
	took    time.Duration
	err     error
	// quiet: a repeat of a failure already reported (the hook line is
	// still missing); counted, not logged again.
	quiet bool
}

// pass runs one reconcile.Pass over the policies in force and the
// network: it matches them, (re)starts the controllers (ctls) for the
// active links that are not paused, works out the desired state with the controllers' current
// rates, plans against the live system and applies. It returns the
// controllers it created, which the caller starts now that their shapers
// are installed, and whether what it believes is live changed.
func (r *reconciler) pass(ctx context.Context, trigger string, links []config.Link, paused map[string]string, facts linkfacts.Facts, ctls *controllers) (fresh []*linkRunner, liveChanged bool) {
	start := time.Now()
	r.mtu = r.cfg.MTU(reconcile.PolicyInterfaces(links))
	rec := &applyRecord{at: start, trigger: trigger}
	changes := r.ev
	if trigger == triggerReflectors {
		changes = r.quiet
	}
	out := reconcile.Pass(ctx, reconcile.PassInput{
		Run: reconcile.Run{
			Backend: r.cfg.Backend, Store: r.cfg.Tokens, Do: reconcile.ApplyPlan,
			Planned:  r.planned(ctx, rec),
			Progress: func(op plan.Op, err error) { changes.Change(ctx, op, err) },
		},
		Links: links, Facts: facts, Partial: true,
		Inputs: desired.Inputs{
			State: r.cfg.Tokens.State, Rates: ctls.rates, Engaged: ctls.engaged, Reflectors: ctls.reflectors, MTU: r.mtu,
			Paused: paused,
		},
		Revise: func(d desired.Desire) bool {
			r.changes.Note(ctx, d.Selection, facts)
			r.linkErrs = map[string]string{}
			var changed bool
			// The new controllers' reflectors are exempt from shaping, and
			// a link that went away left its rates behind.
			fresh, changed = ctls.sync(d, r.mtu, r.linkErrs)
			return changed
		},
		Keep: func(d desired.Desire, problems error) shape.State {
			for _, e := range reconcile.Unjoin(problems) {
				if le, ok := errors.AsType[*desired.LinkError](e); ok {
					r.linkErrs[le.Link] = joinNote(r.linkErrs[le.Link], le.Err.Error())
				} else {
					r.linkErrs[""] = joinNote(r.linkErrs[""], e.Error())
				}
			}
			kept := r.keepFailed(d.State)
			r.desire = d
			return kept
		},
	})
	if out.Step != reconcile.StepSlots && out.Step != reconcile.StepSave {
		rec.plan = out.Plan
	}
	rec.applied = len(out.Applied.Ops)
	applied := func() {
		r.live, r.liveOK = cloneState(out.Desired), true
		if len(out.Applied.Ops) > 0 {
			r.lastChange = time.Now()
		}
		liveChanged = true
	}
	switch out.Step {
	case reconcile.StepSlots:
		rec.err = fmt.Errorf("reading the live slots before giving a link a new one: %w", out.Err)
		r.liveOK = false
	case reconcile.StepSave:
		rec.err = out.Err
	case reconcile.StepObserve:
		rec.err = fmt.Errorf("reading the live state: %w", out.Err)
		r.liveOK = false
	case reconcile.StepBlocked:
		blocked, _ := out.Blocked()
		rec.err = errors.New(blocked.NotApplied)
		r.liveOK = false
	case reconcile.StepApply:
		rec.err = out.Err
		r.liveOK, liveChanged = false, true
		if len(out.Applied.Ops) > 0 {
			r.lastChange = time.Now()
		}
	case reconcile.StepRelease:
		applied()
		rec.err = out.Err
	default:
		applied()
	}
	rec.took = time.Since(start)
	r.finish(ctx, rec)
	return fresh, liveChanged
}

// retryAfter is how soon the last pass asks to be retried, 0 for never.
func (r *reconciler) retryAfter() time.Duration { return r.retryIn }

// finish logs and counts a reconcile and works out its retry after a
// failure.
func (r *reconciler) finish(ctx context.Context, rec *applyRecord) {
	r.lastApply = rec
	ev := r.ev
	if rec.trigger == triggerReflectors {
		ev = r.quiet
	}
	if !rec.quiet {
		ev.Apply(ctx, logging.ApplyResult{Trigger: rec.trigger, Plan: rec.plan, Applied: rec.applied, Duration: rec.took, Err: rec.err})
	}
	if r.cfg.Metrics != nil {
		r.cfg.Metrics.Reconciled(rec.applied, rec.took, rec.err)
	}
	r.retryIn = 0
	if rec.err == nil || r.hookErr != "" {
		// A missing hook line needs a person; the drift interval looks
		// for it again.
		r.backoff = 0
		return
	}
	// Try again soon, backing off to the drift interval: a command that
	// failed once (pfctl busy, a transient error) often works a second
	// later, and a broken system must not be hammered.
	r.backoff = min(max(2*r.backoff, time.Second), r.cfg.DriftInterval)
	r.retryIn = r.backoff
}

// noteUnshaped records which directions the plan cannot shape, for
// status, and logs each finding once, when it first appears: nothing in a
// plan repairs it, so only a person can.
func (r *reconciler) noteUnshaped(ctx context.Context, p plan.Plan) {
	next := map[string]map[string]string{}
	for _, w := range p.Unshaped() {
		seen := false
		for _, dir := range w.Unshaped {
			if next[w.Link] == nil {
				next[w.Link] = map[string]string{}
			}
			if old := next[w.Link][dir]; old != "" {
				next[w.Link][dir] = old + "; " + w.Message
			} else {
				next[w.Link][dir] = w.Message
			}
			seen = seen || strings.Contains(r.unshaped[w.Link][dir], w.Message)
		}
		if !seen {
			r.ev.DriftUnrepaired(ctx, logging.Drift{Link: w.Link, Kind: logging.DriftNotShaped,
				Detail: strings.Join(w.Unshaped, " and ") + " not shaped: " + w.Message},
				"see the detail; `macake plan` shows the same warning")
		}
	}
	r.unshaped = next
}

// driftKind names what an op repairs, in the log's drift vocabulary.
func driftKind(op plan.Op) logging.DriftKind {
	switch {
	case op.Role == plan.RoleEnable:
		return logging.DriftPFDisabled
	case op.Role == plan.RoleRules:
		if op.Action == plan.Create {
			return logging.DriftRulesMissing
		}
		return logging.DriftRulesChanged
	case op.Action == plan.Create:
		return logging.DriftShaperMissing
	}
	return logging.DriftShaperChanged
}

// noteHook records whether a plan is blocked (pf's main ruleset lost the
// hook line), logging the change (loudly when it appears, with what to
// do); it returns true while it is blocked.
func (r *reconciler) noteHook(ctx context.Context, err error) bool {
	if b, ok := backend.Blocked(err); ok {
		if r.hookErr == "" {
			r.ev.DriftUnrepaired(ctx, logging.Drift{Kind: logging.DriftKind(b.Kind), Detail: b.Detail}, b.Fix)
		}
		r.hookErr = strings.TrimSpace(b.Error())
		return true
	}
	if r.hookErr != "" && err == nil {
		r.ev.DriftRepaired(ctx, logging.Drift{Kind: logging.DriftHookMissing, Detail: "pf's main ruleset evaluates the anchor again (the dummynet-anchor line is back)"})
		r.hookErr = ""
	}
	return false
}

// keepFailed adds to desired the live shaping of links that are active
// but could not be worked out this time (e.g. an "auto" rate that needs a
// measurement): a problem never tears working shaping down.
func (r *reconciler) keepFailed(desired shape.State) shape.State {
	out := shape.State{Links: slices.Clone(desired.Links), Unshaped: desired.Unshaped}
	for name := range r.linkErrs {
		if _, ok := desired.Link(name); ok {
			continue
		}
		if l, ok := r.live.Link(name); ok && r.isActive(name) {
			out.Links = append(out.Links, l)
		}
	}
	out.Sort()
	return out
}

// isActive reports whether the last pass found link name active.
func (r *reconciler) isActive(name string) bool {
	for _, l := range r.desire.Selection.Active {
		if l.Name == name {
			return true
		}
	}
	return false
}

// setRate gives direction dir of link the pipe that goes with a
// controller's rate, when the link's shaper is known to be live: one
// backend SetRate, unless the pipe has it already.
func (r *reconciler) setRate(ctx context.Context, link string, dir shape.Direction, rate int64) error {
	i := slices.IndexFunc(r.live.Links, func(l shape.Link) bool { return l.Name == link })
	a, active := r.activeLink(link)
	if i < 0 || !r.liveOK || !active {
		return errNotInstalled
	}
	l := r.live.Links[i]
	p := a.Direction(dir).Queue.Pipe(rate)
	if l.Pipe(dir).Same(p) {
		return nil
	}
	if err := r.cfg.Backend.SetRate(ctx, l, dir, p); err != nil {
		return err
	}
	r.live.Links[i] = l.WithPipe(dir, p)
	return nil
}

// useIdleRTT sizes link's auto queues for idle in the desired state, so
// that the next rate change carries the new queue, with no process and no
// pass under load; the next pass works the same out from the network's
// profile, and installs it itself for a link whose rate did not change.
func (r *reconciler) useIdleRTT(link string, idle time.Duration) {
	for i := range r.desire.Active {
		a := &r.desire.Active[i]
		if a.Policy.Name != link {
			continue
		}
		for _, q := range []*desired.QueueSizer{&a.Upload.Queue, &a.Download.Queue} {
			if q.Auto {
				q.IdleRTT = idle
			}
		}
	}
}

// activeLink is link's desired state as the last pass worked it out.
func (r *reconciler) activeLink(link string) (desired.ActiveLink, bool) {
	for _, a := range r.desire.Active {
		if a.Policy.Name == link && a.Shaped {
			return a, true
		}
	}
	return desired.ActiveLink{}, false
}

func cloneState(s shape.State) shape.State {
	out := shape.State{Links: make([]shape.Link, len(s.Links)), Unshaped: slices.Clone(s.Unshaped)}
	for i, l := range s.Links {
		l.Reflectors = slices.Clone(l.Reflectors)
		out.Links[i] = l
	}
	return out
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// planned is a pass's Planned hook: it notes a blocked plan (the hook
// line) and the links left unshaped, and when nothing macake decided
// changed yet the plan is not empty, records the ops as drift repaired.
func (r *reconciler) planned(ctx context.Context, rec *applyRecord) func(o *reconcile.Outcome) {
	return func(o *reconcile.Outcome) {
		was := r.hookErr
		if r.noteHook(ctx, o.Err) {
			rec.quiet = was != ""
			return
		}
		r.noteUnshaped(ctx, o.Plan)
		if r.liveOK && shape.SameSettings(o.Desired.Links, r.live.Links) && !o.Plan.Empty() {
			// Nothing macake decided changed, yet the live state
			// differs: someone else changed what macake owns.
			rec.trigger = "drift"
			for _, op := range o.Plan.Ops {
				kind := driftKind(op)
				r.ev.DriftRepaired(ctx, logging.Drift{Link: op.Link, Kind: kind, Detail: op.Label + ": " + op.Reason})
				r.driftCounts[string(kind)]++
				if r.cfg.Metrics != nil {
					r.cfg.Metrics.DriftRepaired(string(kind))
				}
			}
		}
	}
}
