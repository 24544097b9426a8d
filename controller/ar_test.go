// SPDX-License-Identifier: Apache-2.0

package controller

// One test per checklist item of reference/autorate.md §1, using the
// spec's worked numbers. Conventions (§1): defaults, compensation off,
// rates in kbit/s, delays in µs.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
)

const (
	dn = shape.Download
	up = shape.Upload
)

func TestAR01_DerivedCadenceAndStartupWarnings(t *testing.T) {
	cfg := exampleConfig()
	cad := CadenceOf(cfg)
	if cad.ResponseSpacing != 50*time.Millisecond || cad.StallTimeout != 250*time.Millisecond {
		t.Errorf("defaults: spacing %v, stall timeout %v; want 50ms, 250ms", cad.ResponseSpacing, cad.StallTimeout)
	}
	if w := Warnings(cfg); len(w) != 0 {
		t.Errorf("defaults: unexpected warnings %q (300 ms ≥ 6 × 50 ms)", w)
	}

	cfg.Pingers = 3
	cad = CadenceOf(cfg)
	if cad.ResponseSpacing != 100*time.Millisecond || cad.StallTimeout != 500*time.Millisecond {
		t.Errorf("3 pingers: spacing %v, stall timeout %v; want 100ms, 500ms", cad.ResponseSpacing, cad.StallTimeout)
	}
	w := Warnings(cfg)
	if len(w) != 1 || !strings.Contains(w[0], "refractory") || !strings.Contains(w[0], "600ms") {
		t.Errorf("3 pingers: warnings %q; want one about the refractory period vs 600ms", w)
	}

	cfg = exampleConfig()
	cfg.ResponseDeadline = 500 * time.Millisecond
	w = Warnings(cfg)
	if len(w) != 1 || !strings.Contains(w[0], "deadline") {
		t.Errorf("deadline 500ms < 2 × 300ms: warnings %q; want one about the deadline", w)
	}
}

func TestAR02_RTTGivesBothDirectionsTheSameHalfRTT(t *testing.T) {
	s := RTTSample(reflectorN(0), t0, 41235*time.Microsecond)
	if s.DownOWD != 20617*time.Microsecond || s.UpOWD != 20617*time.Microsecond {
		t.Fatalf("RTT 41.235 ms: OWDs %v / %v; want 20.617ms both", s.DownOWD, s.UpOWD)
	}

	// Upload statistics are copies of the download ones, even when an
	// earlier timestamp sample had left them different.
	h := newHarness(t, exampleConfig())
	h.owd(10, 0, OneWay, 20*time.Millisecond, 5*time.Millisecond)
	if sl := h.c.slots[0]; sl.base[dn] == sl.base[up] {
		t.Fatalf("setup: baselines already equal (%d)", sl.base[dn])
	}
	h.load(15, 1000, 1000) // loads below 75 % so the delta EWMA runs
	h.rtt(20, 0, 41235*time.Microsecond)
	sl := h.c.slots[0]
	if sl.base[up] != sl.base[dn] || sl.ewma[up] != sl.ewma[dn] {
		t.Errorf("after RTT sample: B %d/%d, E %d/%d; want upload = download", sl.base[dn], sl.base[up], sl.ewma[dn], sl.ewma[up])
	}
	pos := (h.c.winPos + h.c.p.window - 1) % h.c.p.window
	if h.c.dir[up].deltas[pos] != h.c.dir[dn].deltas[pos] {
		t.Errorf("deltas %d/%d; want equal", h.c.dir[dn].deltas[pos], h.c.dir[up].deltas[pos])
	}
}

func TestAR03_AsymmetricBaselineAndDeltaAgainstUpdatedBaseline(t *testing.T) {
	for _, tc := range []struct{ b, owd, wantB, wantDelta int64 }{
		{20000, 30000, 20010, 9990},
		{20000, 15000, 15500, -500},
		{20000, 20000, 20000, 0},
	} {
		b, d := baselineStep(1000, 900000, tc.owd, tc.b)
		if b != tc.wantB || d != tc.wantDelta {
			t.Errorf("B=%d owd=%d: B=%d δ=%d; want %d, %d", tc.b, tc.owd, b, d, tc.wantB, tc.wantDelta)
		}
	}
	// The same through the controller, one direction rising, one falling.
	h := newHarness(t, exampleConfig())
	h.c.slots[0].base = [2]int64{20000, 20000}
	h.owd(10, 0, OneWay, 30*time.Millisecond, 15*time.Millisecond)
	sl := h.c.slots[0]
	pos := (h.c.winPos + h.c.p.window - 1) % h.c.p.window
	if sl.base[dn] != 20010 || sl.base[up] != 15500 || h.c.dir[dn].deltas[pos] != 9990 || h.c.dir[up].deltas[pos] != -500 {
		t.Errorf("controller: B %d/%d δ %d/%d; want 20010/15500, 9990/-500",
			sl.base[dn], sl.base[up], h.c.dir[dn].deltas[pos], h.c.dir[up].deltas[pos])
	}
}

func TestAR04_NewReflectorsStartFromA100msBaseline(t *testing.T) {
	h := newHarness(t, exampleConfig())
	if sl := h.c.slots[0]; sl.base != [2]int64{100000, 100000} || sl.ewma != [2]int64{} {
		t.Fatalf("fresh slot: B %v E %v; want 100000 each, 0", sl.base, sl.ewma)
	}
	wantB := []int64{28000, 20800, 20080}
	wantD := []int64{-8000, -800, -80}
	for i := range 3 {
		h.rtt(float64(10+50*i), 0, 40*time.Millisecond) // OWD 20 ms
		pos := (h.c.winPos + h.c.p.window - 1) % h.c.p.window
		if got, d := h.c.slots[0].base[dn], h.c.dir[dn].deltas[pos]; got != wantB[i] || d != wantD[i] {
			t.Errorf("sample %d: B=%d δ=%d; want %d, %d", i+1, got, d, wantB[i], wantD[i])
		}
	}
	st := h.c.State()
	if st.Download.Delayed != 0 || st.Download.WindowAverage != -1480*time.Microsecond {
		t.Errorf("window: %d delayed, avg %v; want 0 and -1.48ms (the three pull it down)", st.Download.Delayed, st.Download.WindowAverage)
	}
}

func TestAR05_ClockRolloverGuardForTimestampMethods(t *testing.T) {
	h := newHarness(t, exampleConfig())
	h.c.slots[0].base = [2]int64{15000, 10000}
	h.owd(10, 0, ICMPTimestamp, 86_400_015_000*time.Microsecond, -86_399_990_000*time.Microsecond)
	sl := h.c.slots[0]
	pos := (h.c.winPos + h.c.p.window - 1) % h.c.p.window
	if sl.base[dn] != 86_400_015_000 || sl.base[up] != -86_399_990_000 {
		t.Errorf("baselines %d/%d; want reset to the sample", sl.base[dn], sl.base[up])
	}
	if h.c.dir[dn].deltas[pos] != 0 || h.c.dir[up].deltas[pos] != 0 {
		t.Errorf("deltas %d/%d; want 0", h.c.dir[dn].deltas[pos], h.c.dir[up].deltas[pos])
	}
	if sum := sl.base[dn] + sl.base[up]; sum != 25000 {
		t.Errorf("B_dl + B_ul = %d; want 25000 (the round trip survives)", sum)
	}

	// A one-way method without timestamps (irtt) has no guard.
	h = newHarness(t, exampleConfig())
	h.c.slots[0].base = [2]int64{15000, 10000}
	h.owd(10, 0, OneWay, 86_400_015_000*time.Microsecond, -86_399_990_000*time.Microsecond)
	if sl := h.c.slots[0]; sl.base[dn] == 86_400_015_000 {
		t.Errorf("OneWay: baseline reset to the sample; want the ordinary EWMA")
	}
}

func TestAR06_DeltaEWMAGatedByLoad(t *testing.T) {
	run := func(downK int64) int64 {
		h := newHarness(t, exampleConfig())
		h.load(5, downK, 6000) // S = 20000: download downK, upload 30 %
		h.c.slots[0].base = [2]int64{20000, 20000}
		// owd 30010 against B 20000 gives B 20010 and δ exactly 10000.
		h.owd(10, 0, OneWay, 30010*time.Microsecond, 30010*time.Microsecond)
		return h.c.slots[0].ewma[dn]
	}
	if e := run(8000); e != 950 {
		t.Errorf("loads 40 %%/30 %%: E = %d; want 950", e)
	}
	if e := run(15000); e != 0 {
		t.Errorf("download at 75 %%: E = %d; want 0 (gate is strictly below 75)", e)
	}
}

func TestAR07_StaleResponseGuard(t *testing.T) {
	for _, tc := range []struct {
		age       float64
		processed bool
	}{{600, false}, {500, true}, {400, true}} {
		h := newHarness(t, exampleConfig())
		before := h.c.winPos
		now := 2000.0
		out := h.c.Delay(atMS(now), RTTSample(h.c.slots[0].addr, atMS(now-tc.age), 40*time.Millisecond))
		if tc.processed != (h.c.winPos != before) {
			t.Errorf("age %v ms: window written = %v; want %v", tc.age, h.c.winPos != before, tc.processed)
		}
		if h.c.slots[0].base[dn] != 28000 {
			t.Errorf("age %v ms: baseline %d; want 28000 (updated even when stale)", tc.age, h.c.slots[0].base[dn])
		}
		if h.c.lastResp != msUS(now-tc.age) || h.c.slots[0].lastResp != msUS(now-tc.age) {
			t.Errorf("age %v ms: last response %d; want the receive time %d", tc.age, h.c.lastResp, msUS(now-tc.age))
		}
		if d := out.Decisions(); !tc.processed && len(d) != 0 {
			t.Errorf("age %v ms: decisions %v; want none", tc.age, d)
		}
	}
	// A stale response changes no rate even when the rate law would.
	h := newHarness(t, exampleConfig())
	fillWindow(h.c, 99000, 99000, 99000)
	out := h.c.Delay(atMS(2000), RTTSample(h.c.slots[0].addr, atMS(1400), 300*time.Millisecond))
	if len(out.Decisions()) != 0 || h.rateK(dn) != 20000 {
		t.Errorf("stale response under bufferbloat changed the rate: %v", out.Decisions())
	}
}

func TestAR08_AchievedRateFromByteCounters(t *testing.T) {
	if a := achievedRate(500_000, 200_000); a != 20000 {
		t.Errorf("500000 bytes / 200 ms = %d kbit/s; want 20000", a)
	}
	h := newHarness(t, exampleConfig())
	h.rx, h.tx = 500_000, 0
	h.c.Load(atMS(200), LoadSample{At: atMS(200), RxBytes: 500_000})
	if got := h.c.State().Download.Achieved; got != 20_000_000 {
		t.Errorf("controller: %d bit/s; want 20 Mbit/s", got)
	}
	// A 64-bit counter that goes backwards is a reset: 0 kbit/s.
	h = newHarness(t, exampleConfig())
	h.c.Load(atMS(200), LoadSample{At: atMS(200), RxBytes: 1 << 40, TxBytes: 1 << 40})
	h.c.Load(atMS(400), LoadSample{At: atMS(400), RxBytes: 1<<40 + 500_000, TxBytes: 1 << 40})
	h.c.Load(atMS(600), LoadSample{At: atMS(600), RxBytes: 1000, TxBytes: 1<<40 + 25_000})
	st := h.c.State()
	if st.Download.Achieved != 0 || st.Upload.Achieved != 1_000_000 || st.Counters.CounterResets != 1 {
		t.Errorf("reset: download %d, upload %d bit/s, resets %d; want 0, 1 Mbit/s, 1", st.Download.Achieved, st.Upload.Achieved, st.Counters.CounterResets)
	}

	// Interval floor from the base rates: 1000/1000 kbit/s, 12000-bit
	// packets → 24 ms → max(200, 240) = 240 ms; the first rate uses 200.
	cfg := exampleConfig()
	cfg.MTU = 1500
	cfg.ConnectionActive = 500_000
	cfg.Download.Min, cfg.Download.Base = 1_000_000, 1_000_000
	cfg.Upload.Min, cfg.Upload.Base = 1_000_000, 1_000_000
	if iv := CadenceOf(cfg).MonitorInterval; iv != 240*time.Millisecond {
		t.Errorf("monitor interval %v; want 240ms", iv)
	}
	h = newHarness(t, cfg)
	h.c.Load(atMS(240), LoadSample{At: atMS(240), RxBytes: 600_000})
	first := h.c.State().Download.Achieved
	h.c.Load(atMS(480), LoadSample{At: atMS(480), RxBytes: 1_200_000})
	second := h.c.State().Download.Achieved
	if first != 24_000_000 || second != 20_000_000 {
		t.Errorf("600000 bytes: first %d, then %d bit/s; want 24 Mbit/s (÷200 ms), then 20 Mbit/s (÷240 ms)", first, second)
	}
}

func TestAR09_LoadClasses(t *testing.T) {
	for _, tc := range []struct {
		a    int64
		pct  int
		want LoadClass
	}{
		{15200, 76, LoadHigh},
		{15199, 75, LoadLow},
		{15000, 75, LoadLow},
		{2001, 10, LoadLow},
		{2000, 10, LoadIdle},
	} {
		h := newHarness(t, exampleConfig())
		h.load(200, tc.a, 0)
		st := h.c.State().Download
		if st.Load != tc.want || st.LoadPercent != tc.pct {
			t.Errorf("A=%d of S=20000: %d %% %s; want %d %% %s", tc.a, st.LoadPercent, st.Load, tc.pct, tc.want)
		}
	}
}

func TestAR10_SharedWindowCountDecidesAverageGrades(t *testing.T) {
	h := newHarness(t, exampleConfig())
	fillWindow(h.c, 35000, 5000, 40000, 31000, 2000, -3000)
	ds := h.c.dir[dn]
	if ds.nDelayed != 3 || !ds.bloat || ds.avg != 18333 {
		t.Errorf("35,5,40,31,2,−3 ms: %d delayed, bloat %v, avg %d; want 3, true, 18333", ds.nDelayed, ds.bloat, ds.avg)
	}
	fillWindow(h.c, 30000, 30000, 30000, 30000, 30000, 30000)
	ds = h.c.dir[dn]
	if ds.nDelayed != 0 || ds.bloat || ds.avg != 30000 {
		t.Errorf("six × 30 ms: %d delayed, bloat %v, avg %d; want 0, false, 30000 (strictly above)", ds.nDelayed, ds.bloat, ds.avg)
	}
	// One write position for both directions and every reflector.
	h = newHarness(t, exampleConfig())
	h.rtt(10, 0, 40*time.Millisecond)
	h.owd(20, 1, OneWay, 20*time.Millisecond, 90*time.Millisecond)
	if h.c.winPos != 2 || h.c.dir[up].deltas[1] == h.c.dir[dn].deltas[1] {
		t.Errorf("position %d, deltas %d/%d; want position 2 and per-direction values", h.c.winPos, h.c.dir[dn].deltas[1], h.c.dir[up].deltas[1])
	}
}

// cutWith fills the window so that bufferbloat is flagged with the given
// average and runs the download rate law from rate s.
func cutWith(t *testing.T, s int64, deltas ...int64) int64 {
	t.Helper()
	h := newHarness(t, exampleConfig())
	h.c.dir[dn].rate = s
	fillWindow(h.c, deltas...)
	if !h.c.dir[dn].bloat {
		t.Fatalf("setup: no bufferbloat for %v", deltas)
	}
	if r := h.c.updateRate(dn, msUS(1000)); r != ReasonCut {
		t.Fatalf("reason %v; want cut", r)
	}
	return h.c.dir[dn].rate
}

func TestAR11_CutGradedByWindowAverage(t *testing.T) {
	// avg 45 ms → x = 0.5 → ×0.87.
	if got := cutWith(t, 50000, 45000, 45000, 45000, 45000, 45000, 45000); got != 43500 {
		t.Errorf("avg 45 ms: 50000 → %d; want 43500", got)
	}
	// avg 75 ms → x = 1 → ×0.75.
	if got := cutWith(t, 40000, 75000, 75000, 75000, 75000, 75000, 75000); got != 30000 {
		t.Errorf("avg 75 ms: 40000 → %d; want 30000", got)
	}
	// The AR-10 window: bufferbloat with the average below the threshold → ×0.99.
	if got := cutWith(t, 40000, 35000, 5000, 40000, 31000, 2000, -3000); got != 39600 {
		t.Errorf("avg 18.333 ms: 40000 → %d; want 39600", got)
	}
}

func TestAR12_IntegerTruncationMatchesUpstream(t *testing.T) {
	if x := cutGrade(45000, 30000, 60000); x != 500 {
		t.Errorf("x(45 ms) = %d‰; want 500", x)
	}
	if s := cutRate(33333, 500, 990, 750); s != 28999 {
		t.Errorf("33333 × 0.87 = %d; want 28999 (not 29000)", s)
	}
	x := cutGrade(44999, 30000, 60000)
	if m := 1000*990 - x*(990-750); x != 499 || m != 870240 {
		t.Errorf("avg 44.999 ms: x = %d‰, m = %d ppm; want 499, 870240", x, m)
	}
	if s := decayRate(29999, 20000, 990, 1010); s != 29699 {
		t.Errorf("decay of 29999 = %d; want 29699", s)
	}
	if s := increaseRate(20001, 500, 1000, 1040); s != 20401 {
		t.Errorf("increase of 20001 at y = 500‰ = %d; want 20401", s)
	}
	if got := cutWith(t, 33333, 45000, 45000, 45000, 45000, 45000, 45000); got != 28999 {
		t.Errorf("controller: 33333 at avg 45 ms → %d; want 28999", got)
	}
}

// increaseWith runs the download rate law under high load with a fresh
// achieved-rate sample and the given window.
func increaseWith(t *testing.T, deltas ...int64) (*harness, int64, Reason) {
	t.Helper()
	h := newHarness(t, exampleConfig())
	h.load(900, 16000, 0)
	fillWindow(h.c, deltas...)
	if h.c.dir[dn].bloat {
		t.Fatalf("setup: bufferbloat for %v", deltas)
	}
	r := h.c.updateRate(dn, msUS(1000))
	return h, h.c.dir[dn].rate, r
}

func TestAR13_IncreaseGradedByWindowAverage(t *testing.T) {
	if _, s, _ := increaseWith(t, 20000, 20000, 20000, 20000, 20000, 20000); s != 20400 {
		t.Errorf("avg 20 ms: 20000 → %d; want 20400", s)
	}
	if _, s, _ := increaseWith(t, -2000, -2000, -2000, -2000, -2000, -2000); s != 20800 {
		t.Errorf("avg −2 ms: 20000 → %d; want 20800", s)
	}
	// avg 35 ms with only 2 of 6 delayed: ×1.00, but fresh is consumed and
	// the decay timer restarts.
	h, s, r := increaseWith(t, 45000, 45000, 30000, 30000, 30000, 30000)
	if h.c.dir[dn].avg != 35000 || h.c.dir[dn].nDelayed != 2 {
		t.Fatalf("setup: avg %d, %d delayed", h.c.dir[dn].avg, h.c.dir[dn].nDelayed)
	}
	if s != 20000 || r != ReasonIncrease || h.c.dir[dn].fresh || h.c.dir[dn].tDecay != msUS(1000) {
		t.Errorf("avg 35 ms: rate %d, reason %v, fresh %v, decay timer %d; want 20000, increase, false, 1000000",
			s, r, h.c.dir[dn].fresh, h.c.dir[dn].tDecay)
	}
}

func TestAR14_AtMostOneIncreasePerAchievedRateSample(t *testing.T) {
	h := newHarness(t, exampleConfig())
	// t = 1000 ms here is the spec's t = 0: no cut in the last 300 ms.
	h.load(1000, 16000, 3000)
	var increases []float64
	for _, ms := range []float64{1010, 1060, 1110, 1160} {
		if d, ok := decision(h.rtt(ms, 0, 20*time.Millisecond), dn); ok {
			increases = append(increases, ms)
			if d.Rate != 20_800_000 || d.Reason != ReasonIncrease {
				t.Errorf("at %v ms: %v; want download 20800 kbit/s (increase)", ms, d)
			}
		}
	}
	if !slices.Equal(increases, []float64{1010}) {
		t.Errorf("increases at %v ms; want only at 1010", increases)
	}
	h.load(1200, 16000, 3000)
	if d, ok := decision(h.rtt(1210, 0, 20*time.Millisecond), dn); !ok || d.Rate != 21_632_000 {
		t.Errorf("after the next achieved-rate sample: %v, %v; want 21632 kbit/s", d, ok)
	}
}

// bloatRTT is an echo reply whose half RTT sits ~40 ms above a 20 ms baseline.
const (
	cleanRTT = 40 * time.Millisecond
	bloatRTT = 120 * time.Millisecond
)

func TestAR15_BufferbloatRefractoryAndBranchPriority(t *testing.T) {
	// No cut and no increase in the first 300 ms after start.
	h := newHarness(t, exampleConfig())
	h.load(100, 16000, 16000)
	for ms := 150.0; ms <= 300; ms += 50 {
		if out := h.rtt(ms, 0, bloatRTT); len(out.Decisions()) != 0 {
			t.Errorf("at %v ms after start: %v; want nothing", ms, out.Decisions())
		}
	}

	// Persistent bufferbloat: cut at 1000, nothing until 1300, cut at 1350.
	h = newHarness(t, exampleConfig())
	for ms := 500.0; ms <= 850; ms += 50 {
		h.rtt(ms, 0, cleanRTT)
	}
	var cuts []float64
	for ms := 900.0; ms <= 1400; ms += 50 {
		if d, ok := decision(h.rtt(ms, 0, bloatRTT), dn); ok && d.Reason == ReasonCut {
			cuts = append(cuts, ms)
		}
	}
	if !slices.Equal(cuts, []float64{1000, 1350}) {
		t.Errorf("cuts at %v ms; want [1000 1350] (1300 is not > 1000 + 300)", cuts)
	}

	// Bufferbloat clears at 1100 under high load with a fresh sample: the
	// increase still waits for the first response after 1300.
	h = newHarness(t, exampleConfig())
	for ms := 500.0; ms <= 700; ms += 50 {
		h.rtt(ms, 0, cleanRTT)
	}
	seq := []time.Duration{cleanRTT, bloatRTT, bloatRTT, cleanRTT, cleanRTT, bloatRTT} // 750…1000
	for i, r := range seq {
		h.rtt(750+50*float64(i), 0, r)
	}
	if h.c.dir[dn].tCut != msUS(1000) {
		t.Fatalf("setup: last cut at %d µs; want 1000 ms", h.c.dir[dn].tCut)
	}
	h.load(1080, 16000, 16000)
	var incs []float64
	for ms := 1050.0; ms <= 1400; ms += 50 {
		if d, ok := decision(h.rtt(ms, 0, cleanRTT), dn); ok && d.Reason == ReasonIncrease {
			incs = append(incs, ms)
		}
		if ms == 1100 && h.c.dir[dn].bloat {
			t.Fatalf("bufferbloat still flagged at 1100")
		}
	}
	if len(incs) == 0 || incs[0] != 1350 {
		t.Errorf("increases at %v ms; want the first at 1350", incs)
	}
}

func TestAR16_DecayAndRecoveryTowardBase(t *testing.T) {
	for _, tc := range []struct{ s, want int64 }{
		{30000, 29700}, {20100, 20000}, {10000, 10100}, {19900, 20000}, {20000, 20000},
	} {
		if got := decayRate(tc.s, 20000, 990, 1010); got != tc.want {
			t.Errorf("%d → %d; want %d", tc.s, got, tc.want)
		}
	}
	// At base the step changes nothing but still restarts the decay timer.
	h := newHarness(t, exampleConfig())
	h.load(1000, 3000, 3000)
	out := h.rtt(1050, 0, cleanRTT)
	if len(out.Decisions()) != 0 || h.c.dir[dn].tDecay != msUS(1050) {
		t.Errorf("at base: decisions %v, decay timer %d; want none and 1050 ms", out.Decisions(), h.c.dir[dn].tDecay)
	}
}

func TestAR17_DecayTimer(t *testing.T) {
	h := newHarness(t, exampleConfig())
	h.load(950, 16000, 3000)
	if d, ok := decision(h.rtt(1000, 0, cleanRTT), dn); !ok || d.Reason != ReasonIncrease {
		t.Fatalf("setup: no increase at 1000 ms: %v", h.lastOut.Decisions())
	}
	h.load(1020, 3000, 3000) // load falls to low
	var decays []float64
	for ms := 1050.0; ms <= 3200; ms += 50 {
		if d, ok := decision(h.rtt(ms, 0, cleanRTT), dn); ok && d.Reason == ReasonDecay {
			decays = append(decays, ms-1000)
		}
		if int(ms)%200 == 0 {
			h.load(ms+1, 3000, 3000)
		}
	}
	if !slices.Equal(decays, []float64{1050, 2100}) {
		t.Errorf("decays %v ms after the increase; want [1050 2100]", decays)
	}
	steps := func(s int64) int {
		n := 0
		for ; s != 20000; n++ {
			s = decayRate(s, 20000, 990, 1010)
		}
		return n
	}
	if n := steps(80000); n != 138 {
		t.Errorf("80000 → 20000 in %d steps; want 138", n)
	}
	if n := steps(5000); n != 141 {
		t.Errorf("5000 → 20000 in %d steps; want 141", n)
	}
}

func TestAR18_ClampAndMonitorOnlyPin(t *testing.T) {
	if got := cutWith(t, 6000, 75000, 75000, 75000, 75000, 75000, 75000); got != 5000 {
		t.Errorf("6000 full cut → %d; want 4500 clamped to 5000", got)
	}
	h := newHarness(t, exampleConfig())
	h.c.dir[dn].rate = 79000
	h.load(900, 70000, 0)
	fillWindow(h.c, 0, 0, 0, 0, 0, 0)
	h.c.updateRate(dn, msUS(1000))
	if h.rateK(dn) != 80000 {
		t.Errorf("79000 × 1.04 → %d; want 82160 clamped to 80000", h.rateK(dn))
	}

	cfg := exampleConfig()
	cfg.Download.MonitorOnly = true
	h = newHarness(t, cfg)
	if _, ok := decision(h.lastOut, dn); ok {
		t.Errorf("start applied the monitor-only direction: %v", h.lastOut.Decisions())
	}
	h.load(200, 16000, 0)
	if st := h.c.State().Download; st.LoadPercent != 80 || st.Load != LoadHigh {
		t.Errorf("A_dl = 16000: %d %% %s; want 80 %% high (against base)", st.LoadPercent, st.Load)
	}
	for ms := 400.0; ms < 5000; ms += 50 {
		r := cleanRTT
		if int(ms)%300 < 150 {
			r = bloatRTT
		}
		if _, ok := decision(h.rtt(ms, 0, r), dn); ok {
			t.Fatalf("monitor-only download sent at %v ms", ms)
		}
		if int(ms)%200 == 0 {
			h.load(ms, 16000, 0)
		}
	}
	if h.rateK(dn) != 20000 {
		t.Errorf("monitor-only rate moved to %d", h.rateK(dn))
	}
}

func TestAR19_SerialisationCompensationOnAllThresholds(t *testing.T) {
	for _, tc := range []struct{ s, comp int64 }{{5000, 2400}, {20000, 600}, {1000, 12000}} {
		if got := compensation(12000, tc.s); got != tc.comp {
			t.Errorf("S=%d: comp %d µs; want %d", tc.s, got, tc.comp)
		}
	}
	cfg := exampleConfig()
	cfg.MTU = 1500
	cfg.Download.Base = 5_000_000
	h := newHarness(t, cfg)
	st := h.c.State().Download
	if st.DelayThreshold != 32400*time.Microsecond || st.FullIncreaseThreshold != 12400*time.Microsecond || st.FullCutThreshold != 62400*time.Microsecond {
		t.Errorf("S=5000: thresholds %v/%v/%v; want 32.4/12.4/62.4 ms", st.DelayThreshold, st.FullIncreaseThreshold, st.FullCutThreshold)
	}
	h.c.dir[dn].rate = 10000
	fillWindow(h.c, 47400, 47400, 47400, 47400, 47400, 47400)
	h.c.updateRate(dn, msUS(1000))
	if h.rateK(dn) != 8700 {
		t.Errorf("avg 47.4 ms at comp 2.4 ms: 10000 → %d; want ×0.87 = 8700", h.rateK(dn))
	}
}

func TestAR20_ATMCellFraming(t *testing.T) {
	p := wirePacketBits(1492, 40, true)
	if p != 13568 {
		t.Errorf("MTU 1492 + 40 with ATM: %d bits; want 32 cells × 424 = 13568", p)
	}
	if c := compensation(p, 10000); c != 1356 {
		t.Errorf("at 10000 kbit/s: %d µs; want 1356", c)
	}
	if p := wirePacketBits(1500, 0, false); p != 12000 {
		t.Errorf("no ATM: %d; want 12000", p)
	}
}

func TestAR21_ApplyOnlyWhatChangedInOneUpdate(t *testing.T) {
	h := newHarness(t, exampleConfig())
	if d := h.lastOut.Decisions(); len(d) != 2 || d[0].Reason != ReasonStart || d[0].Rate != 20_000_000 || d[1].Rate != 20_000_000 {
		t.Fatalf("start: %v; want both base rates, once", d)
	}
	if again := h.c.Start(atMS(1)); len(again.Decisions()) != 0 {
		t.Errorf("second Start applied again: %v", again.Decisions())
	}
	h.load(1000, 16000, 3000)
	out := h.rtt(1010, 0, cleanRTT)
	if d := out.Decisions(); len(d) != 1 || d[0].Direction != dn || d[0].Rate != 20_800_000 {
		t.Errorf("download up, upload unchanged: %v; want exactly one download update", d)
	}
	h.load(1200, 16000, 16000)
	out = h.rtt(1210, 0, cleanRTT)
	if d := out.Decisions(); len(d) != 2 {
		t.Errorf("both changed: %v; want one combined update of two", d)
	}
	// A decay step at base sends nothing and recomputes nothing.
	cfg := exampleConfig()
	cfg.MTU = 1500
	h = newHarness(t, cfg)
	h.c.dir[up].comp = -1 // would be overwritten by a recomputation
	h.load(1000, 3000, 3000)
	if out := h.rtt(1050, 0, cleanRTT); len(out.Decisions()) != 0 || h.c.dir[up].comp != -1 {
		t.Errorf("decay at base: decisions %v, compensation recomputed %v", out.Decisions(), h.c.dir[up].comp != -1)
	}
}

func TestAR22_SleepAndWake(t *testing.T) {
	for _, enforce := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Download.Base = 45_000_000
		cfg.MinRatesOnSleep = enforce
		h := newHarness(t, cfg)
		var slept float64
		var sleepOut Output
		for ms := 0.0; ms <= 60100; ms += 50 {
			out := h.rtt(ms, 0, cleanRTT)
			if _, ok := hasEvent(out, EventSleep); ok {
				slept, sleepOut = ms, out
				break
			}
		}
		if slept != 60050 {
			t.Fatalf("enforce=%v: slept at %v ms; want 60050 (60000 is exactly 60 s, not enough)", enforce, slept)
		}
		if !h.c.ProbingPaused() || h.c.State().Status != StatusSleeping {
			t.Errorf("enforce=%v: probing paused %v, status %v; want true, sleeping", enforce, h.c.ProbingPaused(), h.c.State().Status)
		}
		wantDn, wantUp := int64(45000), int64(20000)
		if enforce {
			wantDn, wantUp = 5000, 5000
			if len(sleepOut.Decisions()) != 2 {
				t.Errorf("enforce: decisions %v; want both minimums applied", sleepOut.Decisions())
			}
		} else if len(sleepOut.Decisions()) != 0 {
			t.Errorf("sleep sent %v; want rates frozen", sleepOut.Decisions())
		}
		if h.rateK(dn) != wantDn || h.rateK(up) != wantUp {
			t.Errorf("enforce=%v: rates %d/%d; want %d/%d", enforce, h.rateK(dn), h.rateK(up), wantDn, wantUp)
		}

		gen := h.c.ProbeGeneration()
		out := h.load(70000, 2500, 0)
		if _, ok := hasEvent(out, EventWake); !ok || h.c.ProbingPaused() || h.c.ProbeGeneration() == gen {
			t.Fatalf("enforce=%v: 2500/0 kbit/s did not wake and restart probes: %v", enforce, out.Events())
		}
		if h.c.lastResp != msUS(70600) {
			t.Errorf("last response %d; want now + 600 ms", h.c.lastResp)
		}
		if _, ok := hasEvent(h.tick(70850), EventStall); ok {
			t.Errorf("stall declared at now + 850 ms")
		}
		if _, ok := hasEvent(h.tick(70851), EventStall); !ok {
			t.Errorf("no stall just after now + 850 ms with no responses")
		}
	}
}

func TestAR23_StallAndGlobalPingTimeout(t *testing.T) {
	for _, tc := range []struct {
		downK, upK int64
		stall      bool
	}{{5, 3, true}, {50, 20, false}, {50, 5, true}} {
		h := newHarness(t, exampleConfig())
		h.rtt(0, 0, cleanRTT)
		_, stalled := hasEvent(h.load(260, tc.downK, tc.upK), EventStall)
		if stalled != tc.stall {
			t.Errorf("dl %d / ul %d kbit/s at 260 ms: stall %v; want %v", tc.downK, tc.upK, stalled, tc.stall)
		}
	}

	h := newHarness(t, exampleConfig())
	h.rtt(0, 0, cleanRTT)
	h.load(260, 5, 3)
	rate := h.rateK(dn)
	if out := h.tick(10010); len(out.Events()) != 0 {
		t.Errorf("at 10010 ms: %v; want nothing yet (not > 10010)", out.Events())
	}
	if _, ok := hasEvent(h.tick(10011), EventProbeRestart); !ok {
		t.Errorf("no probe restart at 10011 ms")
	}
	if _, ok := hasEvent(h.tick(20100), EventProbeRestart); ok {
		t.Errorf("second probe restart in the same stall episode")
	}
	// Nothing changes rates in STALL; a response ends it.
	if out := h.rtt(20200, 0, bloatRTT); len(out.Decisions()) != 0 || h.rateK(dn) != rate {
		t.Errorf("response in STALL changed rates: %v", out.Decisions())
	}
	if h.c.State().Status == StatusStalled {
		t.Errorf("a response did not end the stall")
	}
	// Both rates above 10 kbit/s also end it.
	h.load(21000, 5, 5)
	h.load(21200, 11, 11)
	if st := h.c.State().Status; st == StatusStalled {
		t.Errorf("traffic both ways did not end the stall")
	}
	// With enforcement the global timeout sets the minimum.
	cfg := exampleConfig()
	cfg.MinRatesOnSleep = true
	h = newHarness(t, cfg)
	h.rtt(0, 0, cleanRTT)
	h.load(260, 0, 0)
	if out := h.tick(10011); len(out.Decisions()) != 2 || out.Decisions()[0].Reason != ReasonStallMinimum {
		t.Errorf("enforced global timeout: %v; want both minimums", out.Decisions())
	}
}

// setSlots gives the active slots baseline sums and delta EWMAs in ms.
func setSlots(h *harness, sums, eDown, eUp []float64, now int64) {
	for i := range h.c.slots {
		sl := &h.c.slots[i]
		sl.base = [2]int64{msUS(sums[i] / 2), msUS(sums[i] / 2)}
		sl.ewma = [2]int64{}
		sl.ewma[dn], sl.ewma[up] = msUS(eDown[i]), msUS(eUp[i])
		sl.lastResp = now
	}
	h.c.lastResp = now
}

func TestAR24_ComparisonEveryMinuteOneReplacementPerCycle(t *testing.T) {
	h := newHarness(t, exampleConfig())
	now := msUS(61_000)
	setSlots(h, []float64{40, 65, 55, 42, 41, 50}, []float64{2, 3, 14, 2, 2, 2}, []float64{1, 1, 1, 1, 1, 1}, now)
	out := h.c.Tick(atMS(61_000))
	e, ok := hasEvent(out, EventReflectorReplaced)
	if !ok || e.Slot != 1 || e.Cause != CauseComparison {
		t.Fatalf("first comparison: %v; want slot 1 replaced (65 − 40 = 25 > 20)", out.Events())
	}
	if len(out.Events()) != 1 {
		t.Errorf("more than one replacement in a cycle: %v", out.Events())
	}
	// Slot 2 (E 14 vs 2) only goes a minute later, if it still exceeds.
	setSlots(h, []float64{40, 41, 55, 42, 41, 50}, []float64{2, 3, 14, 2, 2, 2}, []float64{1, 1, 1, 1, 1, 1}, msUS(62_100))
	if out := h.c.Tick(atMS(62_100)); len(out.Events()) != 0 {
		t.Errorf("comparison again within the minute: %v", out.Events())
	}
	setSlots(h, []float64{40, 41, 55, 42, 41, 50}, []float64{2, 3, 14, 2, 2, 2}, []float64{1, 1, 1, 1, 1, 1}, msUS(121_100))
	if e, ok := hasEvent(h.c.Tick(atMS(121_100)), EventReflectorReplaced); !ok || e.Slot != 2 {
		t.Errorf("next comparison: %v; want slot 2 (14 − 2 = 12 > 10)", e)
	}
	// An excess of exactly 20 ms is kept.
	h = newHarness(t, exampleConfig())
	setSlots(h, []float64{40, 60, 40, 40, 40, 40}, []float64{2, 2, 2, 2, 2, 12}, []float64{1, 1, 1, 1, 1, 1}, now)
	if out := h.c.Tick(atMS(61_000)); len(out.Events()) != 0 {
		t.Errorf("sum excess 20 and EWMA excess 10 (not more): %v; want kept", out.Events())
	}

	// Every hour one random active slot goes instead, ending the cycle.
	h = newHarness(t, exampleConfig())
	hour := msUS(3_600_001)
	setSlots(h, []float64{40, 40, 40, 40, 40, 40}, []float64{0, 0, 0, 0, 0, 0}, []float64{0, 0, 0, 0, 0, 0}, hour)
	h.c.lastComparison = hour
	out = h.c.Tick(atMS(3_600_001))
	if e, ok := hasEvent(out, EventReflectorReplaced); !ok || e.Cause != CauseRotation {
		t.Errorf("after an hour: %v; want one random rotation", out.Events())
	}
	if h.c.lastCheck == hour {
		t.Errorf("the rotation advanced the health-check clock")
	}
}

func TestAR25_OffencesAndReplacementOrder(t *testing.T) {
	// Slot 2 (R2) never answers; the others do, round-robin.
	run := func(t *testing.T, cfg tuning.Config, silentUntil float64) *harness {
		h := newHarness(t, cfg)
		n := len(h.c.slots)
		for i, ms := 0, 10.0; ms < 3500; i, ms = i+1, ms+50 {
			p := i % n
			if p == 2 && ms < silentUntil {
				continue
			}
			h.rtt(ms, p, cleanRTT)
			if _, ok := hasEvent(h.lastOut, EventReflectorReplaced); ok {
				return h
			}
		}
		return h
	}
	h := run(t, exampleConfig(), 1e9)
	e, ok := hasEvent(h.lastOut, EventReflectorReplaced)
	if !ok || e.Slot != 2 || e.Old != reflectorN(2) || e.New != reflectorN(6) || e.Cause != CauseOffences {
		t.Fatalf("replacement: %+v; want slot 2, R2 → R6, offences", e)
	}
	want := []int{0, 1, 6, 3, 4, 5, 7, 2}
	for i, a := range h.c.pool {
		if a != reflectorN(want[i]) {
			t.Fatalf("list %v; want R0 R1 R6 R3 R4 R5 R7 R2", h.c.pool)
		}
	}
	sl := h.c.slots[2]
	if sl.base != [2]int64{100000, 100000} || sl.ewma != [2]int64{} || sl.nOffences != 0 || sl.lastResp != h.c.now {
		t.Errorf("new slot: B %v E %v offences %d last response %d; want 100 ms, 0, 0, now", sl.base, sl.ewma, sl.nOffences, sl.lastResp)
	}
	if got := h.c.ActiveReflectors(nil); got[2] != reflectorN(6) || len(got) != 6 {
		t.Errorf("active reflectors %v", got)
	}

	// Two offences, then answers: kept.
	h = run(t, exampleConfig(), 2500)
	if _, ok := hasEvent(h.lastOut, EventReflectorReplaced); ok || h.c.slots[2].addr != reflectorN(2) {
		t.Errorf("slot with 2 offences replaced")
	}

	// Exactly six reflectors: nothing to swap, but the ring is cleared.
	cfg := exampleConfig()
	cfg.Reflectors = reflectors(6)
	h = run(t, cfg, 1e9)
	if e, ok := hasEvent(h.lastOut, EventReflectorReplaced); !ok || e.New != e.Old || h.c.slots[2].nOffences != 0 {
		t.Errorf("6 reflectors: %+v, offences %d; want kept with a cleared ring", e, h.c.slots[2].nOffences)
	}

	// Retained statistics come back with their reflector.
	h = newHarness(t, exampleConfig())
	h.c.slots[2].base = [2]int64{12345, 23456}
	for range 3 { // R2 → R6 → R7 → R2
		h.c.replace(2, h.c.now, CauseOffences)
	}
	if h.c.slots[2].addr != reflectorN(2) || h.c.slots[2].base != [2]int64{12345, 23456} {
		t.Errorf("R2 returned with B %v; want its retained 12345/23456", h.c.slots[2].base)
	}
}
