// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"math"
	"strings"
	"testing"
	"time"
)

func msDurations(ms ...float64) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m * float64(time.Millisecond))
	}
	return out
}

func TestAddedIsLikeForLike(t *testing.T) {
	idle := Summarize(msDurations(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2), 0, time.Second)
	loaded := Summarize(msDurations(10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 100), 0, LostRTT(idle, time.Second))
	a := AddedDelay(idle, loaded)
	// p50: 15 − 1; p90: 19 − 1 (the idle p90, not its minimum); p99: 91.9 − 1.9.
	if a.P50 != 14*time.Millisecond || a.P90 != 18*time.Millisecond || a.P99 != 90*time.Millisecond {
		t.Errorf("added %+v", a)
	}
}

// TestALostPingCountsAsTheLostDelay: the loaded percentiles are taken over
// every ping sent, a lost one counting as the idle median plus the lost
// delay, so losing the tail of a window moves its p90 to the lost delay
// instead of leaving it out.
func TestALostPingCountsAsTheLostDelay(t *testing.T) {
	idle := Summarize(msDurations(2, 2, 2, 2, 2), 0, time.Second)
	delivered := msDurations(10, 10, 10, 10, 10, 10, 10, 10)
	survivors := Summarize(delivered, 0, LostRTT(idle, time.Second))
	honest := Summarize(delivered, 2, LostRTT(idle, time.Second))
	if survivors.P90 != 10*time.Millisecond {
		t.Fatalf("survivors' p90 %v", survivors.P90)
	}
	if got := AddedDelay(idle, honest).P90; got != time.Second {
		t.Errorf("with 2 of 10 pings lost the added p90 is %v; want the lost delay, 1s", got)
	}
	if got := honest.LossPercent(); math.Abs(got-20) > 1e-9 {
		t.Errorf("loss %.3f %%", got)
	}
	if half := Summarize(delivered, 2, LostRTT(idle, 500*time.Millisecond)); AddedDelay(idle, half).P90 != 500*time.Millisecond {
		t.Errorf("a lost delay of 500ms: added p90 %v", AddedDelay(idle, half).P90)
	}
}

func phaseOf(name string, shaped bool, goodputMbit, idleMs, loadedP50, loadedP90 float64) Phase {
	return Phase{Name: name, Shaped: shaped, Goodput: goodputMbit * 1e6,
		Idle:   Latency{P50: msDurations(idleMs)[0], P90: msDurations(idleMs)[0], P99: msDurations(idleMs)[0], Samples: 40},
		Loaded: Latency{P50: msDurations(loadedP50)[0], P90: msDurations(loadedP90)[0], P99: msDurations(loadedP90)[0], Samples: 300}}
}

func TestCompareAndTable(t *testing.T) {
	run := Run{
		Trace: Trace{Name: "steps", Length: 15 * time.Second, Steps: []Step{{0, 50e6, 10e6}, {5 * time.Second, 15e6, 10e6}, {10 * time.Second, 50e6, 10e6}}},
		Phases: []Phase{
			phaseOf("off", false, 36, 0.1, 600.1, 1000.1),
			phaseOf("on", true, 30, 0.1, 10.1, 20.1),
			phaseOf("off again", false, 38, 0.1, 640.1, 1100.1),
		},
	}
	v, err := run.Compare("on")
	if err != nil {
		t.Fatal(err)
	}
	if v.OffGoodput != 37e6 || v.OffAdded.P90 != 1050*time.Millisecond || v.OnAdded.P90 != 20*time.Millisecond {
		t.Errorf("verdict %+v", v)
	}
	if math.Abs(v.GoodputKept-30.0/37) > 1e-9 || math.Abs(v.P90Ratio-20.0/1050) > 1e-9 || v.DriftGoodput != 2e6 {
		t.Errorf("kept %.4f, p90 ratio %.4f, drift %.0f", v.GoodputKept, v.P90Ratio, v.DriftGoodput)
	}
	var b strings.Builder
	if err := run.WriteTable(&b, "on"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"trace steps, 15s: capacity down 38.33 Mbit/s (min 15.00 Mbit/s, max 50.00 Mbit/s), up 10.00 Mbit/s",
		"| off | 36.00 Mbit/s | +600.0 ms | +1000.0 ms | +1000.0 ms | 0.0 % | 0.10 ms / 0.10 ms |",
		"| on | 30.00 Mbit/s | +10.0 ms | +20.0 ms |",
		"drift between them: +2.00 Mbit/s, +40.0 ms median",
		`"on" kept 81.1 % of the goodput and cut the median added delay by 98 % and the p90 by 98 %`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	run.Phases[1].UploadGoodput = 7.5e6
	b.Reset()
	run.WriteTable(&b, "")
	if !strings.Contains(b.String(), "| on | 30.00 Mbit/s | 7.50 Mbit/s | +10.0 ms |") || !strings.Contains(b.String(), "| goodput up |") {
		t.Errorf("with upload load, the table shows upload goodput:\n%s", b.String())
	}
	if _, err := run.Compare("missing"); err == nil {
		t.Error("Compare with an unknown phase")
	}
}

// TestCallLegFlow: the call's window takes the packets sent in it, its
// one-way delays less the idle window's median, a packet that never came
// counting as the lost delay; packets outside the window are left out.
func TestCallLegFlow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l callLeg
	add := func(at time.Duration, owd time.Duration) {
		l.sent = append(l.sent, t0.Add(at))
		l.owd = append(l.owd, owd)
	}
	for i := range 5 { // idle: 1 ms each way
		add(time.Duration(i)*20*time.Millisecond, time.Millisecond)
	}
	for i := range 10 { // loaded: 11 ms, the last two lost
		owd := 11 * time.Millisecond
		if i >= 8 {
			owd = 0
		}
		add(time.Second+time.Duration(i)*20*time.Millisecond, owd)
	}
	add(3*time.Second, 0) // after the window: not counted
	f := l.flow(t0, t0.Add(100*time.Millisecond), t0.Add(time.Second), t0.Add(2*time.Second), 500*time.Millisecond)
	if f.Sent != 10 || f.Lost != 2 || math.Abs(f.Loss-0.2) > 1e-9 || f.P50 != 10 || f.P99 != 500 || f.Jitter != 0 {
		t.Errorf("flow %+v; want 10 sent, 2 lost, p50 +10 ms, p99 the lost delay", f)
	}
}

func TestLossDisagreement(t *testing.T) {
	for _, c := range []struct {
		sim, kernel float64
		want        string
	}{
		{0.10, 0.09, "+11 %"},
		{0.40, 0.10, "+300 % ✗"},
		{0.001, 0.004, "both < 0.5 %"},
		{0.02, 0, "— ✗"},
	} {
		if got := lossDisagreement(c.sim, c.kernel); got != c.want {
			t.Errorf("lossDisagreement(%v, %v) = %q, want %q", c.sim, c.kernel, got, c.want)
		}
	}
}
