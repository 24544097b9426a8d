// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// planFor plans desired against the live state: for every link, or, when
// link is set, for that link alone (backend.LinkPlanner where links share
// objects, else the plan's ops of that link).
func planFor(ctx context.Context, b backend.Backend, desired shape.State, link string) (plan.Plan, error) {
	if link == "" {
		return b.Plan(ctx, desired)
	}
	if lp, ok := b.(backend.LinkPlanner); ok {
		return lp.PlanLink(ctx, desired, link)
	}
	p, err := b.Plan(ctx, desired)
	return p.OnlyLink(link, nil), err
}

// OneLink is the one link the pass acts on: Link, or the saved plan's;
// "" when it acts on every link.
func (in PassInput) OneLink() string {
	if in.Saved != nil {
		return in.Saved.Link
	}
	return in.Link
}

// scoped returns the problems that stop the pass: all of them, or for a
// pass on one link those of that link and those of no link in
// particular (the settings).
func (in PassInput) scoped(problems error) error {
	if problems == nil || in.Link == "" {
		return problems
	}
	var keep []error
	for _, e := range Unjoin(problems) {
		if le, ok := errors.AsType[*desired.LinkError](e); !ok || le.Link == in.Link {
			keep = append(keep, e)
		}
	}
	return errors.Join(keep...)
}

// knownLink refuses a pass on a link macake knows nothing of: no policy
// of that name and no slot in the state file.
func (in PassInput) knownLink(d desired.Desire) error {
	if in.Link == "" {
		return nil
	}
	if _, ok := d.Slots[in.Link]; ok {
		return nil
	}
	for _, l := range in.Links {
		if l.Name == in.Link {
			return nil
		}
	}
	var names []string
	for _, l := range in.Links {
		names = append(names, l.Name)
	}
	return fmt.Errorf("no link %q: there is no policy file %s.toml, and macake shapes nothing under that name (links: %s)", in.Link, in.Link, orNone(names))
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return fmt.Sprint(names)
}

// scopedSlots is the slot allocation to save: the desired one, or for a
// pass on one link the state file's with only that link's slot as
// desired (other links' new slots wait for their own apply).
func (in PassInput) scopedSlots(desired map[string]int) map[string]int {
	link := in.OneLink()
	if link == "" {
		return desired
	}
	out := maps.Clone(in.Tokens.State.Slots)
	if out == nil {
		out = map[string]int{}
	}
	if s, ok := desired[link]; ok {
		out[link] = s
	} else {
		delete(out, link)
	}
	return out
}

// scopedReleased is the links whose slots to give up after the apply: all
// removed links, or for a pass on one link that link if it is one.
func (in PassInput) scopedReleased(released []string) []string {
	link := in.OneLink()
	if link == "" {
		return released
	}
	if slices.Contains(released, link) {
		return []string{link}
	}
	return nil
}

// teardownLink is a Teardown pass on one link: it removes that link's
// shaping, leaves every other link's as it is live, and gives the link's
// slot back. It reads no policy file. The link is known by its slot in
// the state file; a link without one has nothing live macake could tell
// is its, so the plan is empty.
func teardownLink(ctx context.Context, in PassInput) Outcome {
	var o Outcome
	stop := func(step Step, err error) Outcome {
		o.Step, o.Err = step, err
		return o
	}
	slot, held := in.Tokens.State.Slots[in.Link]
	if !held {
		o.Plan = plan.Plan{Ops: []plan.Op{}, Warnings: []plan.Warning{{Link: in.Link,
			Message: fmt.Sprintf("macake holds no pipe slot for link %q, so nothing live is known to be its", in.Link)}}}
		if in.Planned != nil {
			in.Planned(&o)
		}
		return stop(StepDone, nil)
	}
	u := shape.Unshaped{Name: in.Link, Slot: slot, Reason: "removed with --link " + in.Link}
	if sr, ok := in.Backend.(backend.SlotReader); ok {
		// Which interface it shapes: backends whose objects are per
		// interface (tc) name its leftovers by it.
		use, err := sr.LiveSlots(ctx)
		if err != nil {
			return stop(StepObserve, err)
		}
		for iface, s := range use.Interfaces {
			if s == slot {
				u.Interface = iface
			}
		}
	}
	o.Desired = shape.State{Unshaped: []shape.Unshaped{u}}
	o.Desire = desired.Desire{State: o.Desired, Slots: maps.Clone(in.Tokens.State.Slots), Released: []string{in.Link}}
	p, err := planFor(ctx, in.Backend, o.Desired, in.Link)
	o.Plan = p
	if _, blocked := backend.Blocked(err); blocked {
		// Removing needs no hook line: nothing is left to evaluate.
		err = nil
	}
	return finish(ctx, in, o, err)
}

// applySaved is a pass that applies a saved plan, once nothing it was made
// from has changed.
func applySaved(ctx context.Context, in PassInput) Outcome {
	s := in.Saved
	var o Outcome
	stop := func(step Step, err error) Outcome {
		o.Step, o.Err = step, err
		return o
	}
	o.Desired = s.Desired
	o.Desire = desired.Desire{State: s.Desired, Slots: s.Slots, Released: s.Released}
	o.Plan = s.Plan
	policies, err := PolicyFingerprints(in.ConfigDir)
	if err != nil {
		return stop(StepDesire, err)
	}
	changes := s.inputChanges(in.Backend.Info().Name, in.ConfigDir, policies, in.Facts, in.Tokens.State.Slots)
	now, err := planFor(ctx, in.Backend, s.Desired, s.Link)
	if _, blocked := backend.Blocked(err); err != nil && !blocked {
		return stop(StepObserve, err)
	}
	o.Live = LiveFingerprint(now)
	changes = append(changes, s.liveChanges(now)...)
	if len(changes) > 0 {
		return stop(StepStale, &StaleError{Changes: changes})
	}
	return finish(ctx, in, o, err)
}

// Unjoin splits an errors.Join result (Desired's problems) into its
// errors; nil for nil.
func Unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
