// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"math"
	"testing"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
)

// fakeResult builds a Result whose arms score as scores[arm][case] on
// every run; cases are named by their source.
func fakeResult(sources []string, arms []string, scores map[string][]float64) *Result {
	r := &Result{Arms: arms}
	for _, s := range sources {
		r.Cases = append(r.Cases, Case{Name: s + "/t", Source: s, Dir: shape.Download})
	}
	for ci := range r.Cases {
		var row []*Outcome
		for _, a := range arms {
			o := &Outcome{Case: &r.Cases[ci], Arm: a}
			for k := range 9 {
				sc := scores[a][ci] * (1 + 0.001*float64(k))
				res := &sim.Result{}
				// A higher score is a lower D95 at the same U.
				res.Dir[shape.Download] = sim.DirResult{Loaded: true, U: 0.9, D95: 30 * (0.9/sc - 1), Score: sc, DelaySamples: 100}
				o.Runs = append(o.Runs, res)
			}
			row = append(row, o)
		}
		r.Outcomes = append(r.Outcomes, row)
	}
	return r
}

// TestLeaveOneSourceOut: a candidate that wins big on two sources and loses
// the third is chosen only when the third is held out (where it then
// loses), and a modest candidate that loses nowhere is chosen otherwise.
func TestLeaveOneSourceOut(t *testing.T) {
	sources := []string{"s1", "s2", "s3"}
	r := fakeResult(sources, []string{"upstream", "big", "modest"}, map[string][]float64{
		"upstream": {0.10, 0.10, 0.10},
		"big":      {0.20, 0.20, 0.05},
		"modest":   {0.11, 0.11, 0.11},
	})
	l, err := r.LeaveOneSourceOut("upstream", []string{"big", "modest"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"s1": "modest", "s2": "modest", "s3": "big"}
	for _, h := range l.Held {
		if h.Chosen != want[h.Source] {
			t.Errorf("held out %s: chose %s, want %s", h.Source, h.Chosen, want[h.Source])
		}
	}
	s3 := l.Held[2]
	if s3.Ratio >= 1 || s3.Loss != 1 {
		t.Errorf("s3 held out: ratio %.3f, W/T/L %d/%d/%d; want the big candidate to lose there", s3.Ratio, s3.Win, s3.Tie, s3.Loss)
	}
	// 1.1 × 1.1 × 0.5, geometric mean.
	if want := math.Cbrt(1.1 * 1.1 * 0.5); math.Abs(l.Ratio-want) > 0.01 {
		t.Errorf("estimate %.3f, want %.3f", l.Ratio, want)
	}
	if l.Win != 2 || l.Loss != 1 {
		t.Errorf("W/T/L %d/%d/%d, want 2/0/1", l.Win, l.Tie, l.Loss)
	}
	// Over all sources the big candidate has the best mean but loses s3:
	// the rule does not take it.
	best, _ := r.Choose(0, []int{1, 2}, nil)
	if r.Arms[best] != "modest" {
		t.Errorf("chose %s on every source, want modest", r.Arms[best])
	}
	// Nothing beats the reference: keep it.
	worse := fakeResult(sources, []string{"upstream", "worse"}, map[string][]float64{
		"upstream": {0.10, 0.10, 0.10}, "worse": {0.09, 0.09, 0.09}})
	if best, q := worse.Choose(0, []int{1}, nil); best != 0 || q != 1 {
		t.Errorf("chose arm %d (%.2f×), want the reference", best, q)
	}
	if _, err := r.LeaveOneSourceOut("upstream", []string{"nope"}); err == nil {
		t.Error("an unknown candidate was accepted")
	}
}
