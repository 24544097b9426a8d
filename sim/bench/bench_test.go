// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/macake/macake/score"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
)

func outcome(c *Case, name string, u, d95 []float64) *Outcome {
	o := &Outcome{Case: c, Arm: name}
	for i := range u {
		r := &sim.Result{}
		r.Dir[c.Dir] = sim.DirResult{Loaded: true, DelaySamples: 1000, U: u[i], D95: d95[i], Score: score.Score(u[i], time.Duration(d95[i]*float64(time.Millisecond)))}
		o.Runs = append(o.Runs, r)
	}
	return o
}

func TestWinRule(t *testing.T) {
	c := &Case{Name: "t", Dir: shape.Download}
	base := outcome(c, "b", []float64{.8, .82, .79, .81, .8, .8}, []float64{60, 65, 58, 62, 61, 60})
	for _, tc := range []struct {
		name   string
		u, d95 []float64
		want   Verdict
	}{
		{"lower delay, same U", []float64{.8, .82, .79, .81, .8, .8}, []float64{20, 22, 19, 21, 20, 20}, Win},
		{"lower delay, U 0.01 lower", []float64{.79, .81, .78, .8, .79, .79}, []float64{20, 22, 19, 21, 20, 20}, Win},
		{"much higher delay", []float64{.8, .82, .79, .81, .8, .8}, []float64{200, 220, 190, 210, 200, 200}, Loss},
		{"same", []float64{.8, .82, .79, .81, .8, .8}, []float64{60, 65, 58, 62, 61, 60}, Tie},
		// Far less delay for a lot of throughput: U rule fails, score decides.
		{"trade, score better", []float64{.6, .62, .59, .61, .6, .6}, []float64{5, 6, 5, 5, 6, 5}, Win},
		{"trade, score worse", []float64{.3, .31, .29, .3, .3, .3}, []float64{40, 41, 39, 40, 40, 40}, Loss},
	} {
		a := outcome(c, "a", tc.u, tc.d95)
		if got := Compare(a, base); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if mirrored := Compare(base, a); (tc.want == Win && mirrored != Loss) || (tc.want == Loss && mirrored != Win) || (tc.want == Tie && mirrored != Tie) {
			t.Errorf("%s mirrored: %v", tc.name, mirrored)
		}
	}
}

func TestCasesPairsAndHoldsOut(t *testing.T) {
	dir := t.TempDir()
	src := "../trace/testdata/"
	copyTo := func(from, to string) {
		b, err := os.ReadFile(src + from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyTo("step.down", filepath.Join(dir, "mahimahi", "a.down"))
	copyTo("burst.up", filepath.Join(dir, "mahimahi", "a.up"))
	copyTo("step.down", filepath.Join(dir, "mahimahi", "b.down"))
	copyTo("iperf.csv", filepath.Join(dir, "starlink-road", "iperf.csv"))
	copyTo("iperf.csv", filepath.Join(dir, "starlink-road", "ping.csv")) // not a capacity trace: skipped
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*Case{}
	for i := range cases {
		names[cases[i].Name] = &cases[i]
	}
	if len(cases) != 5 {
		t.Fatalf("%d cases: %v", len(cases), names)
	}
	if c := names["mahimahi/a.down"]; c == nil || c.Reverse == nil || c.Reverse.Name != "mahimahi/a.up" {
		t.Errorf("a.down not paired with a.up: %+v", c)
	}
	if c := names["mahimahi/b.down"]; c == nil || c.Reverse != nil || c.Source != "mahimahi" {
		t.Errorf("b.down: %+v; want no pair, source mahimahi", c)
	}
	if c := names["starlink-road/iperf.csv:upload_mbps"]; c == nil || c.Class != "starlink" || c.Source != "starlink-road" || c.Reverse == nil || c.Reverse.Direction != shape.Download {
		t.Errorf("iperf upload: %+v", c)
	}
	res, err := Run(cases[:1], Config{Options: sim.Options{Duration: 3 * time.Second, Warmup: time.Second}, Flows: 1, Seeds: 2, Offsets: 2,
		Arms: []sim.Arm{{Name: "none", Factory: mustBaseline(t, "none")}, {Name: "fixed", Factory: mustBaseline(t, "fixed")}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Outcomes[0][1].Runs); n != 4 {
		t.Errorf("%d runs per arm, want seeds × offsets = 4", n)
	}
	if g := res.GeoMean(1, nil); g <= 0 {
		t.Errorf("geometric mean %v", g)
	}
}

func mustBaseline(t *testing.T, name string) sim.Factory {
	f, err := sim.Baseline(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
