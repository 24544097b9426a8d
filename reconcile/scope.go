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
func (in Run) scopedSlots(desired map[string]int) map[string]int {
	link := in.Link
	if link == "" {
		return desired
	}
	out := maps.Clone(in.Store.State.Slots)
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
func (in Run) scopedReleased(released []string) []string {
	link := in.Link
	if link == "" {
		return released
	}
	if slices.Contains(released, link) {
		return []string{link}
	}
	return nil
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
