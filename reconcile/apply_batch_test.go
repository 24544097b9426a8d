// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/plan"
)

// batchBackend carries out a plan in the order it is given, failing the op
// at index fail (-1: none), or returning an error naming no op when
// anonymous is set.
type batchBackend struct {
	backend.Backend
	order     []int
	fail      int
	anonymous bool
}

func (b *batchBackend) ExecuteBatch(_ context.Context, ops []plan.Op, done func(int, error)) error {
	for _, i := range b.order {
		if i == b.fail {
			if b.anonymous {
				return errors.New("writer died")
			}
			err := errors.New("refused " + ops[i].Label)
			done(i, err)
			return err
		}
		done(i, nil)
	}
	return nil
}

// Apply through a batching backend reports the ops in the order they ran,
// names the failed one and its step, and calls progress once per op.
func TestApplyThroughABatchExecutor(t *testing.T) {
	p := plan.Plan{Ops: []plan.Op{{Label: "a"}, {Label: "b"}, {Label: "c"}}}
	for _, c := range []struct {
		name      string
		fail      int
		anonymous bool
		wantOps   string
		wantFail  string
		wantStep  int
	}{
		{"all", -1, false, "b a c", "", 0},
		{"named failure", 0, false, "b", "a", 2},
		{"failure naming no op", 0, true, "b", "a", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &batchBackend{order: []int{1, 0, 2}, fail: c.fail, anonymous: c.anonymous}
			var progress []string
			a, err := Apply(context.Background(), b, p, func(op plan.Op, err error) {
				progress = append(progress, op.Label+map[bool]string{true: "!", false: ""}[err != nil])
			})
			var got []string
			for _, op := range a.Ops {
				got = append(got, op.Label)
			}
			if strings.Join(got, " ") != c.wantOps {
				t.Errorf("applied %v, want %s", got, c.wantOps)
			}
			want := strings.Fields(c.wantOps)
			if c.wantFail != "" {
				want = append(want, c.wantFail+"!")
			}
			if strings.Join(progress, " ") != strings.Join(want, " ") {
				t.Errorf("progress %v, want %v", progress, want)
			}
			var ae *ApplyError
			switch {
			case c.wantFail == "" && err != nil:
				t.Errorf("err %v", err)
			case c.wantFail != "" && (!errors.As(err, &ae) || ae.Op.Label != c.wantFail || ae.Step != c.wantStep || a.Failed == nil || a.Failed.Label != c.wantFail):
				t.Errorf("err %v, failed %v; want op %s at step %d", err, a.Failed, c.wantFail, c.wantStep)
			}
		})
	}
}
