// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// Run is what every reconcile acts through and how it reports: the part
// a pass (Pass), a teardown (Teardown) and the apply of a saved plan
// (ApplySaved) share. The zero value of every optional field is what a
// one-shot `macake apply` wants.
type Run struct {
	// Backend plans and applies.
	Backend backend.Backend
	// Store is the state file: the slot allocation is saved to it before
	// anything is applied, and the slots of removed links are released
	// from it once the live state matches. Only passes that apply use it.
	Store *state.File
	// Do is what the run does once it has the plan.
	Do Action
	// Link, when set, acts on that one link alone (`apply --link NAME`,
	// `down --link NAME`): only its objects change, every other link's
	// live shaping stays exactly as it is (even inside an object links
	// share, backend.LinkPlanner), other links' problems do not stop the
	// pass, and only its slot is saved or released.
	Link string
	// Verify plans again after a successful apply and fails when the live
	// state still differs (one-shot apply); watch's drift tick checks
	// instead.
	Verify bool
	// Planned, when set, sees the plan before it is applied (and after
	// the slot allocation is saved): the CLI prints it, watch logs what it
	// repairs.
	Planned func(o *Outcome)
	// Progress, when set, hears the outcome of each op applied.
	Progress func(op plan.Op, err error)
}

// PassInput is what one reconcile pass works from, besides its Run: the
// policies, the network, and what the caller knows that the desired state
// depends on. What the pass learns from the backend (its limits, the live
// slots) it finds itself (desired.BackendFacts).
type PassInput struct {
	Run
	// Links are the policies in force; Facts the network they are matched
	// against.
	Links []config.Link
	Facts linkfacts.Facts
	// Inputs are the rest of what Desired needs from the caller: the state
	// file, the controllers' rates, MTUs.
	Inputs desired.Inputs
	// Blind lets a plan-only pass plan without the live state when
	// reading it needs root (backend.ErrNeedsRoot) and the backend can
	// plan blind (backend.BlindPlanner): a dry run by a user who is not
	// root.
	Blind bool
	// Partial plans the links that could be worked out even when others
	// could not (an "auto" rate without a measurement, no free slot), so
	// that a problem never tears working shaping down (watch). Without it
	// any such problem stops the pass before the live state is read.
	Partial bool
	// Revise, when set, sees the desired state before it is planned and
	// may change the inputs it is worked out from again: watch starts and
	// stops controllers there, whose rates and reflectors it carries. It
	// returns whether it changed anything.
	Revise func(d desired.Desire) (changed bool)
	// Keep, when set, turns the desired state (and the problems of links
	// that could not be worked out) into the state to plan: watch keeps
	// the live shaping of such links.
	Keep func(d desired.Desire, problems error) shape.State
}

// Action is what a pass does once it has the plan.
type Action int

// The actions of a pass.
const (
	// PlanOnly stops at the plan: a dry run, `macake plan`, doctor.
	PlanOnly Action = iota
	// ApplyPlan saves the slot allocation, applies the plan and releases
	// the slots of removed links.
	ApplyPlan
)

// Step names where a pass stopped.
type Step string

// The steps a pass can stop at. An Outcome without an error is StepDone.
const (
	// StepDesire: some policies could not be worked out (Problems).
	StepDesire Step = "desire"
	// StepSlots: reading the live slots, before giving a link a new slot,
	// failed.
	StepSlots Step = "slots"
	// StepObserve: reading the live state for the plan failed.
	StepObserve Step = "observe"
	// StepBlocked: the plan is blocked (*backend.BlockedError).
	StepBlocked Step = "blocked"
	// StepStale: a saved plan no longer fits what it was made from
	// (*StaleError); nothing was applied.
	StepStale Step = "stale"
	// StepSave: saving the slot allocation failed; nothing was applied.
	StepSave Step = "save"
	// StepApply: an op failed (*ApplyError) or the teardown did.
	StepApply Step = "apply"
	// StepVerify: after the apply the live state still differs, or could
	// not be read again.
	StepVerify Step = "verify"
	// StepRelease: releasing the slots of removed links (or, for a
	// teardown, clearing the state file) failed after the live state was
	// made to match.
	StepRelease Step = "release"
	// StepDone: the pass did what it was asked.
	StepDone Step = "done"
)

// Outcome is what a pass found and did.
type Outcome struct {
	// Desire is the desired state as worked out (after Revise).
	Desire desired.Desire
	// Problems joins the *LinkError of every active link that could not be
	// worked out (Desired's error), whether or not the pass went on.
	Problems error
	// Desired is the state the plan was made against: Desire.State, or
	// what Keep made of it.
	Desired shape.State
	// Plan is the plan, with the desired state's warnings first; for a
	// teardown, the plan it carried out.
	Plan plan.Plan
	// Blind: the plan was made without the live state (PassInput.Blind).
	Blind bool
	// Live is LiveFingerprint of the backend's plan, for saving it
	// (NewSavedPlan): set by plan-only passes that read the live state.
	Live string
	// Applied is what was applied, and Took how long applying took.
	Applied Applied
	Took    time.Duration
	// Step is where the pass stopped and Err why (nil at StepDone).
	Step Step
	Err  error
}

// Blocked returns the obstacle of a blocked plan, if the pass met one.
func (o *Outcome) Blocked() (*backend.BlockedError, bool) { return backend.Blocked(o.Err) }

// Pass is one level-triggered reconcile, the one sequence every command
// that plans or changes the live shaping runs: work out the desired state
// from the policies, the facts and the state file; when a link gets a new
// slot, read which slots are live and work it out again, so that a lost
// state file renumbers nothing and no slot of another tool's is taken;
// plan against the live system; then (ApplyPlan) save the slot allocation
// before any pipe can exist under a new number, show the plan (Planned),
// apply it in order, optionally plan again to check, and release the
// slots of removed links once their objects are gone.
func Pass(ctx context.Context, in PassInput) Outcome {
	// The slot lookup and the plan share one reading of the live state;
	// the check after an apply reads afresh.
	ctx = backend.WithLiveReading(ctx)
	b := in.Backend
	be := desired.BackendFactsOf(b.Info())
	var o Outcome
	stop := func(step Step, err error) Outcome {
		o.Step, o.Err = step, err
		return o
	}

	o.Desire, o.Problems = desired.Desired(in.Links, in.Facts, in.Inputs, be)
	var slotErr error
	if (in.Partial || in.scoped(o.Problems) == nil) && o.Desire.AllocatesSlots(in.Inputs.State) {
		if sr, ok := b.(backend.SlotReader); ok {
			var use backend.SlotUse
			switch use, slotErr = sr.LiveSlots(ctx); {
			case slotErr == nil:
				be.LiveSlots, be.ForeignSlots = use.Interfaces, use.Foreign
				o.Desire, o.Problems = desired.Desired(in.Links, in.Facts, in.Inputs, be)
			case in.Blind && errors.Is(slotErr, backend.ErrNeedsRoot) && blindPlanner(b):
				// The slots stay as the state file assigns them.
				o.Blind, slotErr = true, nil
			}
		}
	}
	if in.Revise != nil && in.Revise(o.Desire) {
		o.Desire, o.Problems = desired.Desired(in.Links, in.Facts, in.Inputs, be)
	}
	if err := in.scoped(o.Problems); err != nil && !in.Partial {
		return stop(StepDesire, err)
	}
	if err := in.knownLink(o.Desire); err != nil {
		return stop(StepDesire, err)
	}
	o.Desired = o.Desire.State
	if in.Keep != nil {
		o.Desired = in.Keep(o.Desire, o.Problems)
	}
	if slotErr != nil {
		// A slot recorded without knowing which are another tool's could
		// take over its pipes: the state file is what proves ownership.
		return stop(StepSlots, slotErr)
	}

	var err error
	if !o.Blind {
		o.Plan, err = planFor(ctx, b, o.Desired, in.Link)
		if in.Blind && errors.Is(err, backend.ErrNeedsRoot) && blindPlanner(b) {
			o.Blind = true
		}
	}
	if o.Blind {
		o.Plan, err = b.(backend.BlindPlanner).PlanUnobserved(o.Desired)
		if in.Link != "" {
			o.Plan = o.Plan.OnlyLink(in.Link, nil)
		}
	} else if _, blocked := backend.Blocked(err); in.Do == PlanOnly && (err == nil || blocked) {
		// Only a plan to show can be saved (plan --out); watch's passes
		// need no fingerprint.
		o.Live = LiveFingerprint(o.Plan)
	}
	warnings := o.Desire.Warnings
	if in.Link != "" {
		warnings = plan.Plan{Warnings: warnings}.OnlyLink(in.Link, nil).Warnings
	}
	o.Plan.Warnings = append(append([]plan.Warning(nil), warnings...), o.Plan.Warnings...)
	return in.finish(ctx, o, err)
}

// finish carries a pass on from its plan (made with error planErr, which
// may be a *backend.BlockedError): save the slot allocation, show the
// plan, apply it, check, release the slots of removed links.
func (in Run) finish(ctx context.Context, o Outcome, planErr error) Outcome {
	b := in.Backend
	stop := func(step Step, err error) Outcome {
		o.Step, o.Err = step, err
		return o
	}
	_, blocked := backend.Blocked(planErr)
	if planErr != nil && !blocked {
		return stop(StepObserve, planErr)
	}
	o.Err = planErr
	if slots := o.Desire.Slots; !blocked && in.Do == ApplyPlan {
		slots = in.scopedSlots(slots)
		if !maps.Equal(in.Store.State.Slots, slots) {
			// Slots first, atomically: a pipe must never exist under a
			// number the state file does not assign, or after a crash
			// before the anchor names it nothing would prove it is
			// macake's.
			if err := in.Store.Update(func(st *state.State) { st.Slots = slots }); err != nil {
				return stop(StepSave, err)
			}
		}
	}
	if in.Planned != nil {
		in.Planned(&o)
	}
	if blocked {
		// Nothing is applied: pf would never evaluate the rules, and
		// macake never edits the main ruleset itself.
		return stop(StepBlocked, planErr)
	}
	if in.Do == PlanOnly {
		return stop(StepDone, nil)
	}
	if !o.Plan.Empty() {
		start := time.Now()
		applied, err := Apply(ctx, b, o.Plan, in.Progress)
		o.Applied, o.Took = applied, time.Since(start)
		if err != nil {
			return stop(StepApply, err)
		}
		if in.Verify {
			// Level-triggered check: right after an apply, the live state
			// must match, or something else is changing it (or macake has
			// a bug).
			again, err := planFor(ctx, b, o.Desired, in.Link)
			if err == nil && !again.Empty() {
				err = fmt.Errorf("the live state still differs after applying (%s left); another tool may be changing %s at the same time; run 'macake apply' again",
					english.Plural(len(again.Ops), "change"), b.Info().System)
			}
			if err != nil {
				return stop(StepVerify, err)
			}
		}
	}
	// The removed links' objects are gone: their slots are free again.
	if err := in.Store.ReleaseSlots(in.scopedReleased(o.Desire.Released)); err != nil {
		return stop(StepRelease, err)
	}
	return stop(StepDone, nil)
}

func blindPlanner(b backend.Backend) bool {
	_, ok := b.(backend.BlindPlanner)
	return ok
}

// PolicyMTUs returns the MTU of every interface the policies name that
// exists here (Inputs.MTU).
func PolicyMTUs(links []config.Link) map[string]int {
	return linkfacts.MTUs(PolicyInterfaces(links))
}

// PolicyInterfaces lists the interfaces the policies name, in their order.
func PolicyInterfaces(links []config.Link) []string {
	names := make([]string, 0, len(links))
	for _, l := range links {
		names = append(names, l.Match.Interface)
	}
	return names
}
