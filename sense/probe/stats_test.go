// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"net/netip"
	"testing"
	"time"
)

func ms(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x * float64(time.Millisecond))
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	d := ms(5, 1, 4, 2, 3, 10, 9, 8, 7, 6)
	for _, tc := range []struct {
		p    float64
		want float64
	}{{50, 5}, {90, 9}, {100, 10}, {10, 1}, {0.0001, 1}, {95, 10}} {
		if got := Percentile(d, tc.p); got != ms(tc.want)[0] {
			t.Errorf("p%v = %v, want %vms", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != -1 {
		t.Error("empty input")
	}
}

func TestLikeForLikeComparesEachPercentileWithItself(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	// Reflector a: idle 20 ms with jitter up to 30 ms; under load 120 ms,
	// p90 140 ms. The added delay is +100 at p50 and +110 at p90, not
	// 140 - 20 = +120 (loaded p90 minus idle minimum).
	idle := map[netip.Addr]Summary{
		a: Summarize(ms(20, 20, 20, 20, 20, 21, 22, 25, 30, 40), 0),
		b: Summarize(ms(50, 50, 50, 50, 50, 50, 50, 50, 50, 50), 0),
		c: Summarize(nil, 10), // never answered while idle: not compared
	}
	loaded := map[netip.Addr]Summary{
		a: Summarize(ms(110, 115, 118, 120, 120, 121, 125, 130, 140, 180), 0),
		b: Summarize(ms(150, 150, 150, 150, 150, 150, 150, 150, 160, 160), 0),
		c: Summarize(ms(300), 0),
	}
	got := LikeForLike(idle, loaded)
	if got.Targets != 2 {
		t.Errorf("targets %d, want 2", got.Targets)
	}
	// a: p50 120-20 = 100, p90 140-30 = 110; b: 100, 110. Medians: 100, 110.
	if got.P50 != 100*time.Millisecond || got.P90 != 110*time.Millisecond {
		t.Errorf("added p50 %v p90 %v, want +100ms / +110ms", got.P50, got.P90)
	}
}

func TestBaselineFallsFastRisesSlowly(t *testing.T) {
	var b Baseline
	if d := b.Update(20 * time.Millisecond); d != 0 || b.Value() != 20*time.Millisecond {
		t.Fatalf("first sample: delta %v baseline %v", d, b.Value())
	}
	d := b.Update(120 * time.Millisecond)
	if b.Value() != 20100*time.Microsecond || d != 99900*time.Microsecond {
		t.Errorf("after a 120 ms sample: baseline %v delta %v", b.Value(), d)
	}
	b.Update(10 * time.Millisecond)
	if v := b.Value(); v < 10*time.Millisecond || v > 11100*time.Microsecond {
		t.Errorf("after a 10 ms sample: baseline %v, want ~11ms", v)
	}
}

// TestWindowCountingCountsALostProbeAsTheLostRTT: the counting window takes
// its percentiles over every probe sent, so losing a fifth of them moves
// the p90 to the lost RTT, where the replies-only window leaves them out;
// both count the replies and the losses alike.
func TestWindowCountingCountsALostProbeAsTheLostRTT(t *testing.T) {
	var r Recorder
	a := netip.MustParseAddr("192.0.2.1")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		s := Sample{Reflector: a, Kind: KindReply, Sent: t0.Add(time.Duration(i) * time.Second), RTT: 20 * time.Millisecond}
		if i >= 8 {
			s.Kind, s.RTT = KindLost, 0
		}
		r.Add(s)
	}
	r.Add(Sample{Reflector: netip.MustParseAddr("192.0.2.2"), Kind: KindLost, Sent: t0})
	plain := r.Window(a, t0, t0.Add(time.Minute))
	counted := r.WindowCounting(a, t0, t0.Add(time.Minute), time.Second)
	if plain.Samples != 8 || plain.Lost != 2 || plain.P90 != 20*time.Millisecond {
		t.Errorf("replies only: %+v", plain)
	}
	if counted.Samples != 8 || counted.Lost != 2 || counted.P50 != 20*time.Millisecond || counted.P90 != time.Second {
		t.Errorf("counting: %+v; want p90 at the lost RTT", counted)
	}
}
