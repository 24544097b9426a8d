// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"fmt"
	"slices"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/plan"
)

// Applied is what Apply carried out.
type Applied struct {
	// Ops are the ops that succeeded, in execution order.
	Ops []plan.Op
	// Failed is the op that failed, nil when none did.
	Failed *plan.Op
}

// Count returns how many applied ops created, updated and removed.
func (a Applied) Count() (created, updated, removed int) {
	return plan.Plan{Ops: a.Ops}.Count()
}

// ApplyError is an apply that stopped at a failed op. The ops before it
// were applied; the system is in between, and the next pass converges from
// there.
type ApplyError struct {
	// Op is the op that failed; Step is its 1-based position among Steps.
	Op          plan.Op
	Step, Steps int
	Err         error
}

// Error names the step, the op and the cause.
func (e *ApplyError) Error() string {
	return fmt.Sprintf("step %d of %d (%s %s) failed: %v", e.Step, e.Steps, e.Op.Action, e.Op.Label, e.Err)
}

// Unwrap returns the cause.
func (e *ApplyError) Unwrap() error { return e.Err }

// Apply executes p's ops in order through b and stops at the first
// failure, because later ops may depend on it (a rule must not name a pipe
// that failed to appear). A backend.BatchExecutor carries out a plan of
// several ops in its own batches, in an order it knows is safe. progress, when not nil, is called after each op
// with its outcome. It returns what was applied, and an *ApplyError when an
// op failed or ctx ended before the plan was done.
func Apply(ctx context.Context, b backend.Backend, p plan.Plan, progress func(op plan.Op, err error)) (Applied, error) {
	var a Applied
	if be, ok := b.(backend.BatchExecutor); ok && len(p.Ops) > 1 {
		return applyBatch(ctx, be, p, progress)
	}
	for i := range p.Ops {
		op := p.Ops[i]
		err := ctx.Err()
		if err == nil {
			err = b.Execute(ctx, op)
		}
		if progress != nil {
			progress(op, err)
		}
		if err != nil {
			a.Failed = &p.Ops[i]
			return a, &ApplyError{Op: op, Step: i + 1, Steps: len(p.Ops), Err: err}
		}
		a.Ops = append(a.Ops, op)
	}
	return a, nil
}

// applyBatch is Apply through a backend that runs many ops per process.
// The backend may run the ops in another order; Applied.Ops and the failed
// step follow the order they ran in.
func applyBatch(ctx context.Context, b backend.BatchExecutor, p plan.Plan, progress func(op plan.Op, err error)) (Applied, error) {
	var a Applied
	failed := -1
	ran := make([]bool, len(p.Ops))
	err := ctx.Err()
	if err == nil {
		err = b.ExecuteBatch(ctx, p.Ops, func(i int, err error) {
			if progress != nil {
				progress(p.Ops[i], err)
			}
			if err != nil {
				failed = i
				return
			}
			ran[i] = true
			a.Ops = append(a.Ops, p.Ops[i])
		})
	}
	if err == nil {
		return a, nil
	}
	if failed < 0 {
		// Nothing named: the first op not done is the one that did not run.
		failed = max(0, slices.Index(ran, false))
		if progress != nil {
			progress(p.Ops[failed], err)
		}
	}
	a.Failed = &p.Ops[failed]
	return a, &ApplyError{Op: p.Ops[failed], Step: len(a.Ops) + 1, Steps: len(p.Ops), Err: err}
}
