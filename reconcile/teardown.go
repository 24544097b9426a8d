// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// Teardown makes the desired state empty: it removes everything macake
// owns (Backend.Teardown) and clears the state file's slots and pf token;
// with Link, only that link's shaping, every other link's staying as it is
// live, and gives its slot back. It reads no policy file. A Planned hook
// is shown the plan first (watch's shutdown has none, and so reads
// nothing before it tears down).
func Teardown(ctx context.Context, in Run) Outcome {
	ctx = backend.WithLiveReading(ctx)
	if in.Link != "" {
		return in.teardownLink(ctx)
	}
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
	if st := in.Store.State; len(st.Slots) > 0 || st.PFToken != "" {
		if err := in.Store.Update(func(st *state.State) { st.Slots, st.PFToken = nil, "" }); err != nil {
			return stop(StepRelease, err)
		}
	}
	return stop(StepDone, nil)
}

// teardownLink is a Teardown of one link. The link is known by its slot
// in the state file; a link without one has nothing live macake could
// tell is its, so the plan is empty.
func (in Run) teardownLink(ctx context.Context) Outcome {
	var o Outcome
	stop := func(step Step, err error) Outcome {
		o.Step, o.Err = step, err
		return o
	}
	slot, held := in.Store.State.Slots[in.Link]
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
	o.Desire = desired.Desire{State: o.Desired, Slots: maps.Clone(in.Store.State.Slots), Released: []string{in.Link}}
	p, err := planFor(ctx, in.Backend, o.Desired, in.Link)
	o.Plan = p
	if _, blocked := backend.Blocked(err); blocked {
		// Removing needs no hook line: nothing is left to evaluate.
		err = nil
	}
	return in.finish(ctx, o, err)
}
