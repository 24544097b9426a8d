// SPDX-License-Identifier: Apache-2.0

package linkmodel

import (
	"math"
	"testing"
	"time"

	"github.com/macake/macake/shape"
)

// TestCalibratedToPublishedStatistics checks the Starlink and LTE models
// against the 1-s statistics of benchmark.md §7.3 that they claim to follow,
// for several seeds.
func TestCalibratedToPublishedStatistics(t *testing.T) {
	type want struct{ mean, p5, p50, p95, step, empty float64 }
	for _, tc := range []struct {
		model string
		dir   shape.Direction
		want  want
	}{
		{"starlink", shape.Download, want{268.2, 75.71, 285.94, 407.79, 20.30, 0}},
		{"starlink", shape.Upload, want{18.11, 4.91, 16.90, 34.99, 0.84, 0}},
		{"lte", shape.Download, want{16.65, 4.12, 13.81, 36.66, 3.30, 0.036}},
		{"lte", shape.Upload, want{13.32, 2.48, 11.50, 27.53, 1.51, 0.005}},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			l, err := New(tc.model, seed)
			if err != nil {
				t.Fatal(err)
			}
			s := l.Capacity[tc.dir].Stats()
			check := func(what string, got, want, tol float64) {
				if math.Abs(got-want) > tol*want+1e-9 {
					t.Errorf("%s %s seed %d: %s %.2f, want %.2f ±%.0f%%", tc.model, tc.dir, seed, what, got, want, tol*100)
				}
			}
			check("mean", s.Mean, tc.want.mean, 0.05)
			check("p5", s.P5, tc.want.p5, 0.15)
			check("p50", s.P50, tc.want.p50, 0.05)
			check("p95", s.P95, tc.want.p95, 0.05)
			check("median |1-s step|", s.MedianAbsStep, tc.want.step, 0.5)
			if tc.want.empty > 0 {
				check("empty 100 ms bins", s.SubSecondEmptyBinShare, tc.want.empty, 0.5)
			}
		}
	}
}

func TestSameSeedSameLink(t *testing.T) {
	for _, name := range Names {
		a, _ := New(name, 7)
		b, _ := New(name, 7)
		c, _ := New(name, 8)
		for _, d := range shape.Directions {
			ra, rb, rc := a.Capacity[d].Rates, b.Capacity[d].Rates, c.Capacity[d].Rates
			differs := false
			for i := range ra {
				if ra[i] != rb[i] {
					t.Fatalf("%s %s: seed 7 gave two different links at step %d", name, d, i)
				}
				if ra[i] != rc[i] {
					differs = true
				}
			}
			if !differs && a.Capacity[d].Stats().CV > 0 {
				t.Errorf("%s %s: seeds 7 and 8 gave the same link", name, d)
			}
		}
	}
}

func TestStarlinkReconfiguresEvery15s(t *testing.T) {
	l, _ := New("starlink", 1)
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.RTTSteps[1:] {
		if sec := int(s.At/time.Second) % 60; sec != 12 && sec != 27 && sec != 42 && sec != 57 {
			t.Errorf("RTT step at %v: not at second 12/27/42/57 of a minute", s.At)
		}
		if s.RTT < 40*time.Millisecond || s.RTT >= 52*time.Millisecond {
			t.Errorf("RTT %v outside 40–52 ms", s.RTT)
		}
	}
	// Capacity changes most at the reconfiguration instants.
	bins := l.Capacity[shape.Download].Bins(time.Second)
	var atReconf, other, nr, no float64
	for i := 1; i < len(bins); i++ {
		step := math.Abs(bins[i] - bins[i-1])
		if i%15 == ReconfigSecond%15 {
			atReconf += step
			nr++
		} else {
			other += step
			no++
		}
	}
	if atReconf/nr < 2*other/no {
		t.Errorf("mean |step| at reconfigurations %.1f Mbit/s, elsewhere %.1f: want the 15-s structure to stand out", atReconf/nr/1e6, other/no/1e6)
	}
}

func TestConstantAndStepLinks(t *testing.T) {
	c := Constant("c", 50e6, 10e6, 20*time.Millisecond)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if m := c.Mean(shape.Download); m != 50e6 {
		t.Errorf("mean %v", m)
	}
	s := Steps("s", []int64{50e6, 15e6, 50e6}, 10*time.Second, 10e6, 20*time.Millisecond)
	if got := s.Capacity[shape.Download].Bins(time.Second); len(got) != 30 || got[12] != 15e6 {
		t.Errorf("step link bins %v", got)
	}
	if _, err := New("wifi", 1); err == nil {
		t.Error("unknown model accepted")
	}
}
