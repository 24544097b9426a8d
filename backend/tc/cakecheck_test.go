// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// trialRunner answers the CAKE trials (`unshare --net tc -force -batch -`)
// as a tc that refuses every line naming the word refuse (with message),
// and every other command from a recording.
type trialRunner struct {
	replay         *replayRunner
	refuse, answer string
	notRoot        bool
	mu             sync.Mutex
	trials         int
}

func (r *trialRunner) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	if cmd.Argv[0] != goldenTools.Unshare {
		return r.replay.Run(ctx, cmd)
	}
	r.mu.Lock()
	r.trials++
	r.mu.Unlock()
	if r.notRoot {
		return execrun.Result{ExitCode: 1, Stderr: []byte("unshare: unshare failed: Operation not permitted\n")}, nil
	}
	var stderr strings.Builder
	failed := false
	for i, line := range strings.Split(strings.TrimSuffix(cmd.Stdin, "\n"), "\n") {
		if strings.Contains(" "+line+" ", " "+r.refuse+" ") || (failed && strings.HasPrefix(line, "qdisc del")) {
			fmt.Fprintf(&stderr, "%s\nUsage: ... cake [ bandwidth RATE | unlimited* | autorate-ingress ]\nCommand failed -:%d\n", r.answer, i+1)
			failed = !failed
			continue
		}
		failed = false
	}
	res := execrun.Result{Stderr: []byte(stderr.String())}
	if stderr.Len() > 0 {
		res.ExitCode = 1
	}
	return res, nil
}

// planCase plans desired against a recorded case with r answering trials.
func planCase(t *testing.T, name string, desired shape.State, r *trialRunner) plan.Plan {
	t.Helper()
	rec := readRecording(t, filepath.Join("testdata", "diff", name, "live.txtar"))
	r.replay = rec.runner()
	b := fakeBackend(r, rec.caps)
	p, err := b.Plan(context.Background(), desired)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A CAKE option that tc or the kernel refuses when tried is reported
// before anything changes, with the option, its key and what to do, and
// the shaping in force stays: no op touches the link, whose other link
// is planned as usual.
func TestRefusedCakeOptionLeavesTheLinkAsItIs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipping: CAKE options are tried on Linux only")
	}
	for _, c := range []struct {
		name, refuse, answer, wantFix string
	}{
		{"old iproute2", "wash", `What is "wash"?`, "this iproute2 (tc) does not know it: upgrade iproute2, or change cake.wash"},
		{"kernel", "nat", "Error: No conntrack support in kernel.", "the kernel's sch_cake refuses it: change cake.nat"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The rich options are in force on wan; lan has CAKE's defaults.
			wanted := readDesired(t, "testdata/diff/cake-converged/desired.json")
			wanted.Links[0].Upload.RateBits = 30_000_000 // and the rate moves
			r := &trialRunner{refuse: c.refuse, answer: c.answer}
			p := planCase(t, "cake-converged", wanted, r)
			for _, op := range p.Ops {
				if op.Link == "wan" {
					t.Errorf("the plan touches wan, whose CAKE options are refused: %s", op.Label)
				}
			}
			got := formatPlan(p)
			for _, dir := range []string{"upload", "download"} {
				want := fmt.Sprintf("the %s shaper in force is left as it is", dir)
				if !strings.Contains(got, want) || !strings.Contains(got, c.wantFix) || !strings.Contains(got, fmt.Sprintf("CAKE's %q (cake.%s) refused", c.refuse, c.refuse)) {
					t.Errorf("the plan does not say %q and %q:\n%s", want, c.wantFix, got)
				}
			}

			// From nothing: nothing of wan is created, and it says so.
			p = planCase(t, "cake-fresh", wanted, &trialRunner{refuse: c.refuse, answer: c.answer})
			for _, op := range p.Ops {
				if op.Link == "wan" {
					t.Errorf("the plan creates part of wan, whose CAKE options are refused: %s", op.Label)
				}
			}
			if got := formatPlan(p); !strings.Contains(got, "unshaped=upload") || !strings.Contains(got, "upload is not shaped until the policy or the system changes") {
				t.Errorf("no unshaped warning:\n%s", got)
			}
		})
	}
}

// Trials are made once per option set and Backend; where they cannot be
// made (not root) nothing is refused and the plan is as without them.
func TestCakeTrialsAreCachedAndNeedRoot(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipping: CAKE options are tried on Linux only")
	}
	wanted := readDesired(t, "testdata/diff/cake-converged/desired.json")
	r := &trialRunner{refuse: "nothing"}
	rec := readRecording(t, "testdata/diff/cake-fresh/live.txtar")
	r.replay = rec.runner()
	b := fakeBackend(r, rec.caps)
	for range 3 {
		if _, err := b.Plan(context.Background(), wanted); err != nil {
			t.Fatal(err)
		}
	}
	if r.trials != 1 {
		t.Errorf("three plans of the same options made %d trials, want 1", r.trials)
	}
	p := planCase(t, "cake-fresh", wanted, &trialRunner{notRoot: true})
	golden := planCase(t, "cake-fresh", wanted, &trialRunner{refuse: "nothing"})
	if formatPlan(p) != formatPlan(golden) {
		t.Errorf("without root the plan differs:\n%s\nwant\n%s", formatPlan(p), formatPlan(golden))
	}
	// A process that cannot try stops trying: no child per plan.
	notRoot := &trialRunner{notRoot: true, replay: rec.runner()}
	b = fakeBackend(notRoot, rec.caps)
	for range 3 {
		if _, err := b.Plan(context.Background(), wanted); err != nil {
			t.Fatal(err)
		}
	}
	if notRoot.trials != 1 {
		t.Errorf("three plans without root tried %d times, want once", notRoot.trials)
	}
}
