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

// PassInput is everything one reconcile pass works from. The zero value of
// every optional field is what a one-shot `macake apply` wants.
type PassInput struct {
	// Links are the policies in force; Facts the network they are matched
	// against.
	Links []config.Link
	Facts linkfacts.Facts
	// Inputs are the rest of what Desired needs (the state file, the
	// controllers' rates, MTUs). Pass fills in MaxSlots, KernelOverhead and Limits
	// from the backend.
	Inputs desired.Inputs
	// Backend plans and applies.
	Backend backend.Backend
	// Tokens is the state file the pass saves the slot allocation to
	// before it applies, and releases the slots of removed links from once
	// the live state matches. Only Apply and Teardown passes use it.
	Tokens *state.File

	// Do is what the pass does once it has the plan.
	Do Action
	// Teardown makes the desired state empty: the pass removes everything
	// macake owns, with Backend.Teardown, and clears the state file's
	// slots and pf token; Links and Facts are not read. A Planned hook is
	// shown the plan first (watch's shutdown has none, and so reads
	// nothing before it tears down).
	Teardown bool
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
	// Verify plans again after a successful apply and fails when the live
	// state still differs (one-shot apply); watch's drift tick checks
	// instead.
	Verify bool
	// Link, when set, acts on that one link alone (`apply --link NAME`,
	// `down --link NAME`): only its objects change, every other link's
	// live shaping stays exactly as it is (even inside an object links
	// share, backend.LinkPlanner), other links' problems do not stop the
	// pass, and only its slot is saved or released. With Teardown it
	// removes that link's shaping and gives its slot back.
	Link string
	// Saved, when set, is a reviewed plan to apply exactly (`apply FILE`):
	// the pass checks that nothing it was made from changed (ConfigDir's
	// policy files, the network, the state file's slots, the live state)
	// and stops at StepStale if anything did; else it applies the saved
	// ops as they are. Links are not read (the fingerprints stand for
	// them); Facts must be the network now.
	Saved *SavedPlan
	// ConfigDir is the policy directory, for Saved's check.
	ConfigDir string

	// Revise, when set, sees the desired state before it is planned and
	// may change the inputs it is worked out from again: watch starts and
	// stops controllers there, whose rates and reflectors it carries. It
	// returns whether it changed anything.
	Revise func(d desired.Desire) (changed bool)
	// Keep, when set, turns the desired state (and the problems of links
	// that could not be worked out) into the state to plan: watch keeps
	// the live shaping of such links.
	Keep func(d desired.Desire, problems error) shape.State
	// Planned, when set, sees the plan before it is applied (and after
	// the slot allocation is saved): the CLI prints it, watch logs what it
	// repairs.
	Planned func(o *Outcome)
	// Progress, when set, hears the outcome of each op applied.
	Progress func(op plan.Op, err error)
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
// apply it in order,
// optionally plan again to check, and release the slots of removed links
// once their objects are gone.
func Pass(ctx context.Context, in PassInput) Outcome {
	// The slot lookup and the plan share one reading of the live state;
	// the check after an apply reads afresh.
	ctx = backend.WithLiveReading(ctx)
	switch {
	case in.Saved != nil:
		return applySaved(ctx, in)
	case in.Teardown && in.Link != "":
		return teardownLink(ctx, in)
	case in.Teardown:
		return teardown(ctx, in)
	}
	b := in.Backend
	info := b.Info()
	inputs := in.Inputs
	inputs.MaxSlots, inputs.KernelOverhead, inputs.Limits = info.MaxSlots, info.KernelOverhead, info.Limits
	var o Outcome
	stop := func(step Step, err error) Outcome {
		o.Step, o.Err = step, err
		return o
	}

	o.Desire, o.Problems = desired.Desired(in.Links, in.Facts, inputs)
	var slotErr error
	if (in.Partial || in.scoped(o.Problems) == nil) && o.Desire.AllocatesSlots(inputs.State) {
		if sr, ok := b.(backend.SlotReader); ok {
			var use backend.SlotUse
			switch use, slotErr = sr.LiveSlots(ctx); {
			case slotErr == nil:
				inputs.LiveSlots, inputs.ForeignSlots = use.Interfaces, use.Foreign
				o.Desire, o.Problems = desired.Desired(in.Links, in.Facts, inputs)
			case in.Blind && errors.Is(slotErr, backend.ErrNeedsRoot) && blindPlanner(b):
				// The slots stay as the state file assigns them.
				o.Blind, slotErr = true, nil
			}
		}
	}
	if in.Revise != nil && in.Revise(o.Desire) {
		o.Desire, o.Problems = desired.Desired(in.Links, in.Facts, inputs)
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
	return finish(ctx, in, o, err)
}

// finish carries a pass on from its plan (made with error planErr, which
// may be a *backend.BlockedError): save the slot allocation, show the
// plan, apply it, check, release the slots of removed links.
func finish(ctx context.Context, in PassInput, o Outcome, planErr error) Outcome {
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
		if !maps.Equal(in.Tokens.State.Slots, slots) {
			// Slots first, atomically: a pipe must never exist under a
			// number the state file does not assign, or after a crash
			// before the anchor names it nothing would prove it is
			// macake's.
			if err := in.Tokens.Update(func(st *state.State) { st.Slots = slots }); err != nil {
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
			again, err := planFor(ctx, b, o.Desired, in.OneLink())
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
	if err := in.Tokens.ReleaseSlots(in.scopedReleased(o.Desire.Released)); err != nil {
		return stop(StepRelease, err)
	}
	return stop(StepDone, nil)
}

// teardown is a Teardown pass.
func teardown(ctx context.Context, in PassInput) Outcome {
	var o Outcome
	stop := func(step Step, err error) Outcome {
		o.Step, o.Err = step, err
		return o
	}
	if in.Planned != nil {
		// Teardown plans again and executes: it also forgets a token pf
		// no longer knows.
		var err error
		if o.Plan, err = in.Backend.Plan(ctx, shape.State{}); err != nil {
			return stop(StepObserve, err)
		}
		in.Planned(&o)
	}
	if in.Do == PlanOnly {
		return stop(StepDone, nil)
	}
	start := time.Now()
	done, err := in.Backend.Teardown(ctx)
	o.Took = time.Since(start)
	o.Plan = done
	if err != nil {
		return stop(StepApply, err)
	}
	o.Applied.Ops = done.Ops
	if st := in.Tokens.State; len(st.Slots) > 0 || st.PFToken != "" {
		if err := in.Tokens.Update(func(st *state.State) { st.Slots, st.PFToken = nil, "" }); err != nil {
			return stop(StepRelease, err)
		}
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
