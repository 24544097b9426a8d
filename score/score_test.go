// SPDX-License-Identifier: Apache-2.0

package score

import (
	"math"
	"testing"
	"time"
)

func TestScoreHalvesAtTheReference(t *testing.T) {
	for _, c := range []struct {
		u    float64
		d95  time.Duration
		want float64
	}{
		{0.9, 0, 0.9},
		{0.9, Reference, 0.45},
		{0.8, 90 * time.Millisecond, 0.2},
		{1, DefaultLostDelay, 1 / (1 + 1000.0/30)},
	} {
		if got := Score(c.u, c.d95); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Score(%v, %v) = %v, want %v", c.u, c.d95, got, c.want)
		}
	}
}

func TestPercentileInterpolates(t *testing.T) {
	asc := []float64{1, 2, 3, 4, 5}
	for _, c := range []struct{ p, want float64 }{{0, 1}, {50, 3}, {90, 4.6}, {100, 5}, {-1, 1}, {200, 5}} {
		if got := Percentile(asc, c.p); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if Percentile(nil, 50) != 0 || Percentile([]float64{7}, 99) != 7 {
		t.Error("empty or single")
	}
}

// TestLostPacketsCountAsTheLostDelay: the percentiles are over every packet
// sent; losing the slowest tenth moves the p95 to the lost delay, where
// over the survivors it would fall.
func TestLostPacketsCountAsTheLostDelay(t *testing.T) {
	d := Delays{Lost: 2}
	for range 18 {
		d.Delivered = append(d.Delivered, 10)
	}
	if d.Sent() != 20 || math.Abs(d.Loss()-0.1) > 1e-12 {
		t.Fatalf("sent %d, loss %v", d.Sent(), d.Loss())
	}
	all := d.All(Ms(DefaultLostDelay))
	if len(all) != 20 || Percentile(all, 95) != 1000 || Percentile(all, 50) != 10 {
		t.Errorf("all %v: p50 %v, p95 %v", all, Percentile(all, 50), Percentile(all, 95))
	}
	f := FlowOf(d, 500*time.Millisecond)
	if f.Sent != 20 || f.Lost != 2 || f.P50 != 10 || f.P99 != 500 || f.Jitter != 0 {
		t.Errorf("flow %+v", f)
	}
	if (Delays{}).Loss() != 0 || FlowOf(Delays{}, 0).P99 != 0 {
		t.Error("an empty window has no loss and no delay")
	}
}

func TestJitterIsTheMeanStepBetweenConsecutivePackets(t *testing.T) {
	d := Delays{Delivered: []float64{10, 12, 11, 15}}
	if got := d.Jitter(); math.Abs(got-7.0/3) > 1e-12 {
		t.Errorf("jitter %v, want (2+1+4)/3", got)
	}
	if (Delays{Delivered: []float64{3}}).Jitter() != 0 {
		t.Error("one packet has no jitter")
	}
}

func TestLostOrDefault(t *testing.T) {
	if LostOrDefault(0) != DefaultLostDelay || LostOrDefault(-time.Second) != DefaultLostDelay || LostOrDefault(300*time.Millisecond) != 300*time.Millisecond {
		t.Error("LostOrDefault")
	}
}
