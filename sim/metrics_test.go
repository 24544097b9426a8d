// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/linkmodel"
	"github.com/macake/macake/sim/report"
)

// TestOptionsNeverPanic: no value of any option makes a run panic; each is
// either refused by Validate (and then by Run) or runs to the end.
func TestOptionsNeverPanic(t *testing.T) {
	l := linkmodel.Constant("c", 10e6, 10e6, 20*time.Millisecond)
	f, _ := sim.Baseline("oracle-lag0.1")
	durations := []time.Duration{math.MinInt64, -time.Hour, -5 * time.Second, -1, 0, 1, time.Millisecond, 999 * time.Millisecond, 3 * time.Second, time.Hour, math.MaxInt64}
	base := sim.Options{Duration: 3 * time.Second, Warmup: 500 * time.Millisecond, Flows: [2]int{1, 1}, Seed: 1}
	type mut struct {
		name string
		set  func(o *sim.Options)
	}
	var muts []mut
	for _, d := range durations {
		for _, field := range []struct {
			name string
			ptr  func(o *sim.Options) *time.Duration
		}{
			{"Duration", func(o *sim.Options) *time.Duration { return &o.Duration }},
			{"Buffer", func(o *sim.Options) *time.Duration { return &o.Buffer }},
			{"Offset", func(o *sim.Options) *time.Duration { return &o.Offset }},
			{"ActuationDelay", func(o *sim.Options) *time.Duration { return &o.ActuationDelay }},
			{"ProbeInterval", func(o *sim.Options) *time.Duration { return &o.ProbeInterval }},
			{"ReflectorSpread", func(o *sim.Options) *time.Duration { return &o.ReflectorSpread }},
			{"ReflectorJitter", func(o *sim.Options) *time.Duration { return &o.ReflectorJitter }},
			{"MeasureInterval", func(o *sim.Options) *time.Duration { return &o.MeasureInterval }},
			{"LoadInterval", func(o *sim.Options) *time.Duration { return &o.LoadInterval }},
			{"TickInterval", func(o *sim.Options) *time.Duration { return &o.TickInterval }},
			{"Warmup", func(o *sim.Options) *time.Duration { return &o.Warmup }},
			{"Phases[0]", func(o *sim.Options) *time.Duration { return &o.Phases[0] }},
			{"Phases[1]", func(o *sim.Options) *time.Duration { return &o.Phases[1] }},
		} {
			muts = append(muts, mut{fmt.Sprintf("%s=%d", field.name, d), func(o *sim.Options) { *field.ptr(o) = d }})
		}
	}
	for _, n := range []int{math.MinInt, -1, 0, 1, 64, 257, math.MaxInt} {
		muts = append(muts,
			mut{fmt.Sprintf("Flows=%d,0", n), func(o *sim.Options) { o.Flows = [2]int{n, 0} }},
			mut{fmt.Sprintf("Reflectors=%d", n), func(o *sim.Options) { o.Reflectors = n }},
			mut{fmt.Sprintf("RwndBytes=%d", n), func(o *sim.Options) { o.RwndBytes = n }},
		)
	}
	for _, p := range []float64{math.Inf(-1), -1, 0.5, 1, math.NaN()} {
		muts = append(muts, mut{fmt.Sprintf("ProbeLoss=%v", p), func(o *sim.Options) { o.ProbeLoss = p }})
	}
	for _, b := range []sim.Bounds{{Min: -1, Base: 1, Max: 2}, {Min: 5, Base: 1, Max: 2}, {Min: 1, Base: 1, Max: math.MaxInt64}} {
		muts = append(muts, mut{fmt.Sprintf("Bounds=%v", b), func(o *sim.Options) { o.Bounds[shape.Download] = b }})
	}
	for _, m := range muts {
		opt := base
		m.set(&opt)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panic: %v", m.name, p)
				}
			}()
			if err := opt.Validate(); err != nil {
				if _, err := sim.Run(l, opt, f); err == nil {
					t.Errorf("%s: Validate refuses (%v) but Run accepts", m.name, err)
				}
				return
			}
			if opt.Duration > 5*time.Second {
				return // valid and only long: nothing new to learn from running it
			}
			if _, err := sim.Run(l, opt, f); err != nil {
				t.Errorf("%s: valid options, Run: %v", m.name, err)
			}
		}()
	}
}

// TestUIsAtMostOne: U counts what the bottleneck served against what it
// could serve, over whole bins, so no window can show more than the link
// carried. The capacity falls tenfold at the end of the warm-up: counted
// at the receiver, the bits already on the way before it would land in the
// window, and a run ending mid-bin would weigh a sliver of a bin.
func TestUIsAtMostOne(t *testing.T) {
	l := linkmodel.Steps("drop", []int64{50e6, 50e6, 5e6, 5e6, 5e6, 5e6, 5e6, 5e6}, time.Second, 10e6, 100*time.Millisecond)
	for _, d := range []time.Duration{4 * time.Second, 4001 * time.Millisecond, 4050 * time.Millisecond, 5999 * time.Millisecond} {
		opt := download(4, d)
		r := run(t, l, opt, "none")
		if u := r.Dir[shape.Download].U; u > 1 || u < 0.9 {
			t.Errorf("duration %v: U %.3f; unshaped flows keep the link busy, and it cannot carry more than its capacity", d, u)
		}
		if want := (d - 2*time.Second).Truncate(100 * time.Millisecond); r.Measured != want {
			t.Errorf("duration %v: measured %v, want the whole bins after the warm-up (%v)", d, r.Measured, want)
		}
	}
}

// TestNoProbeBackMeansNoDelayAndNoScore: when the capacity vanishes after
// the warm-up no measurement probe comes back; the delays are unknown, not
// 0 ms, so the run has no score, JSON says null and the table a dash.
func TestNoProbeBackMeansNoDelayAndNoScore(t *testing.T) {
	l := linkmodel.Steps("outage", []int64{10e6, 10e6, 0, 0, 0, 0, 0, 0, 0, 0}, time.Second, 10e6, 40*time.Millisecond)
	r := run(t, l, download(2, 5*time.Second), "none")
	r.Controller = "none"
	d := r.Dir[shape.Download]
	if d.DelaySamples != 0 || d.Score != 0 {
		t.Fatalf("samples %d, score %v; want no sample and no score", d.DelaySamples, d.Score)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Download map[string]any `json:"download"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"d50_ms", "d95_ms", "d99_ms", "score"} {
		if v, ok := doc.Download[k]; !ok || v != nil {
			t.Errorf("JSON %s = %v (present %v); want null", k, v, ok)
		}
	}
	var out bytes.Buffer
	report.Comparison(&out, []*sim.Result{r})
	row := ""
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "none ") {
			row = line
			break
		}
	}
	if f := strings.Fields(row); len(f) < 11 || f[4] != "—" || f[5] != "—" || f[len(f)-1] != "—" {
		t.Errorf("table row %q; want — for D50, D95 and the score", row)
	}
}

// TestProbeLossCountsDropsOnly: on a link that never fills its queues no
// measurement probe is lost, even though the last ones are still on the way
// when the run ends; random loss at the bottleneck shows as probe loss on
// that direction's leg.
func TestProbeLossCountsDropsOnly(t *testing.T) {
	l := linkmodel.Constant("c", 20e6, 20e6, 50*time.Millisecond)
	opt := download(1, 6*time.Second)
	opt.RwndBytes = 32 << 10 // far below the buffer: no drop anywhere
	r := run(t, l, opt, "none")
	for _, d := range shape.Directions {
		if x := r.Dir[d]; x.ProbeLoss != 0 || x.DelaySamples < 300 {
			t.Errorf("%s: probe loss %.4f over %d samples; nothing was dropped", d, x.ProbeLoss, x.DelaySamples)
		}
	}
	l.Loss[shape.Upload] = 0.2
	r = run(t, l, opt, "none")
	if up, down := r.Dir[shape.Upload].ProbeLoss, r.Dir[shape.Download].ProbeLoss; up < 0.14 || up > 0.26 || down != 0 {
		t.Errorf("probe loss up %.3f, down %.3f; want about the 20 %% random loss on the upward leg only", up, down)
	}
}
