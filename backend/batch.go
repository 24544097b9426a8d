// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"strconv"

	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// batchPlanner is a Backend's planning and batch execution, which a
// teardown is made of.
type batchPlanner interface {
	Plan(ctx context.Context, desired shape.State) (plan.Plan, error)
	BatchExecutor
}

// TeardownBatch is the teardown of a BatchExecutor: it plans for an empty
// desired state and carries the plan out through ExecuteBatch, stopping
// at the first failure. It returns the plan it executed; after a failure,
// with only the ops that were done, and running it again continues from
// what is left.
func TeardownBatch(ctx context.Context, b batchPlanner) (plan.Plan, error) {
	p, err := b.Plan(ctx, shape.State{})
	if err != nil {
		return p, err
	}
	var done []plan.Op
	err = b.ExecuteBatch(ctx, p.Ops, func(i int, err error) {
		if err == nil {
			done = append(done, p.Ops[i])
		}
	})
	if err != nil {
		p.Ops = done
	}
	return p, err
}

// FailedBatchLine reads which line of a batch of lines a tool fed on
// stdin (dnctl, tc -batch, ip -batch) failed at, from its stderr: re's
// first group is the line number, counted from 1. It is false when
// stderr names no line, or one outside the batch.
func FailedBatchLine(re *lazyregexp.Regexp, stderr []byte, lines int) (int, bool) {
	m := re.FindSubmatch(stderr)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(string(m[1]))
	return n, err == nil && n >= 1 && n <= lines
}
