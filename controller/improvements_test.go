// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// Each improvement (autorate.md §14.2) with the switch off (upstream) and on.

func TestImprovementMeasuredInterval(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Improvements.MeasuredInterval = on
		h := newHarness(t, cfg)
		// 20 Mbit/s for 250 ms: 625 000 bytes, read 250 ms apart.
		h.c.Load(atMS(250), LoadSample{At: atMS(250), RxBytes: 625_000})
		got := h.c.State().Download.Achieved
		want := int64(25_000_000) // upstream divides by the nominal 200 ms
		if on {
			want = 20_000_000
		}
		if got != want {
			t.Errorf("measured=%v: %d bit/s; want %d", on, got, want)
		}
	}
}

func TestImprovementSleepAtBase(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Download.Start = 80_000_000
		cfg.DecayRefractory = time.Hour // keep the rate above base
		cfg.Improvements.SleepAtBase = on
		h := newHarness(t, cfg)
		var out Output
		for ms := 0.0; ms <= 61000; ms += 50 {
			out = h.rtt(ms, 0, cleanRTT)
			if _, ok := hasEvent(out, EventSleep); ok {
				break
			}
		}
		if _, ok := hasEvent(out, EventSleep); !ok {
			t.Fatalf("on=%v: never slept", on)
		}
		want := int64(80000)
		if on {
			want = 20000
			if d, ok := decision(out, dn); !ok || d.Reason != ReasonSleepBase {
				t.Errorf("on: decisions %v; want download to base", out.Decisions())
			}
		}
		if h.rateK(dn) != want {
			t.Errorf("on=%v: download %d on sleep; want %d", on, h.rateK(dn), want)
		}
	}
}

func TestImprovementProbeLiveness(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Improvements.ProbeLiveness = on
		h := newHarness(t, cfg)
		h.rtt(0, 0, cleanRTT)
		// Traffic flows both ways, so missing responses are not a stall,
		// and upstream never restarts the (dead) probes.
		var restarts []float64
		for ms := 200.0; ms <= 25000; ms += 200 {
			if _, ok := hasEvent(h.load(ms, 5000, 5000), EventProbeRestart); ok {
				restarts = append(restarts, ms)
			}
		}
		if h.c.State().Status == StatusStalled {
			t.Fatalf("on=%v: stalled with traffic both ways", on)
		}
		if !on && len(restarts) != 0 {
			t.Errorf("upstream restarted probes at %v", restarts)
		}
		if on && (len(restarts) != 2 || restarts[0] != 10200 || restarts[1] != 20400) {
			t.Errorf("liveness restarts at %v ms; want [10200 20400] (every 10 s without responses)", restarts)
		}
	}
}

func TestImprovementSurfaceBackendErrors(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Improvements.SurfaceBackendErrors = on
		h := newHarness(t, cfg)
		h.load(1000, 16000, 3000)
		d, ok := decision(h.rtt(1010, 0, cleanRTT), dn)
		if !ok {
			t.Fatalf("setup: no increase")
		}
		h.c.ReportApply(dn, errors.New("dnctl: exit status 1"))
		// The next response changes nothing (no fresh sample): upstream
		// believes the rate is set; with the switch the rate is retried.
		retry, got := decision(h.rtt(1060, 0, cleanRTT), dn)
		if on != got {
			t.Fatalf("on=%v: retried %v (%v)", on, got, retry)
		}
		if on {
			if retry.Rate != d.Rate || retry.Reason != ReasonRetry {
				t.Errorf("retry %v; want %v again (retry)", retry, d)
			}
			h.c.ReportApply(dn, nil)
			if _, again := decision(h.rtt(1110, 0, cleanRTT), dn); again {
				t.Errorf("retried again after success")
			}
			if st := h.c.State().Download; st.LastApplied != d.Rate {
				t.Errorf("last applied %d; want %d", st.LastApplied, d.Rate)
			}
		}
	}
}

func TestImprovementDropCounterResets(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Improvements.DropCounterResets = on
		h := newHarness(t, cfg)
		h.c.Load(atMS(200), LoadSample{At: atMS(200), RxBytes: 1 << 40})
		h.c.Load(atMS(400), LoadSample{At: atMS(400), RxBytes: 1<<40 + 400_000})
		h.c.Load(atMS(600), LoadSample{At: atMS(600), RxBytes: 5})
		got := h.c.State().Download.Achieved
		want := int64(0)
		if on {
			want = 16_000_000 // the previous sample stands
		}
		if got != want {
			t.Errorf("on=%v: after a reset %d bit/s; want %d", on, got, want)
		}
		// Either way the counters are re-baselined on the new value.
		h.c.Load(atMS(800), LoadSample{At: atMS(800), RxBytes: 5 + 100_000})
		if got := h.c.State().Download.Achieved; got != 4_000_000 {
			t.Errorf("on=%v: after re-baselining %d bit/s; want 4 Mbit/s", on, got)
		}
	}
}

// TestImprovementCutToAchieved: the download was saturating its 20 Mbit/s
// pipe, then the link fell to 6 Mbit/s for two samples. Upstream's first cut
// is graded (here the full ×0.75: 15 000 kbit/s); with the switch the
// download goes to 0.9 × 6 000 = 5 400 at once. The upload, which only
// carried a trickle, gets upstream's cut either way.
func TestImprovementCutToAchieved(t *testing.T) {
	for _, on := range []bool{false, true} {
		h := achievedCutHarness(t, on, false)
		wantDown, wantUp := int64(15_000), int64(15_000)
		if on {
			wantDown = 5_400
		}
		if h.rateK(dn) != wantDown || h.rateK(up) != wantUp {
			t.Errorf("on=%v: download %d, upload %d kbit/s; want %d, %d", on, h.rateK(dn), h.rateK(up), wantDown, wantUp)
		}
	}
	// One low sample after a high one is a dip, not a new capacity: the
	// larger of the last two samples sets the cut.
	cfg := exampleConfig()
	cfg.Improvements.CutToAchieved = true
	h := newHarness(t, cfg)
	h.load(200, 19_000, 500)
	h.load(400, 6_000, 500)
	bloat(h, 450)
	if got := h.rateK(dn); got != 15_000 {
		t.Errorf("after a single low sample: download %d kbit/s; want upstream's 15000", got)
	}
	cfg.AchievedCut = 1.5
	if err := cfg.Validate(); err == nil {
		t.Error("achieved cut 1.5 accepted")
	}
}

// TestImprovementFastRecovery: after the achieved cut to 5 400 kbit/s the
// link delivers 12 Mbit/s again and the window is clean. Upstream's
// increase is ×1.04 (5 616); with the switch the download goes halfway to
// min(the 15 000 before the cut, 0.9 × 12 000) = 10 800, i.e. 8 100.
func TestImprovementFastRecovery(t *testing.T) {
	for _, on := range []bool{false, true} {
		h := achievedCutHarness(t, true, on)
		h.load(800, 12_000, 500)
		fillWindow(h.c, 0, 0, 0, 0, 0, 0)
		h.rtt(1000, 0, 2*time.Duration(h.c.slots[0].base[0])*time.Microsecond)
		want := int64(5_616)
		if on {
			want = 8_100
		}
		if got := h.rateK(dn); got != want {
			t.Errorf("on=%v: download %d kbit/s; want %d", on, got, want)
		}
	}
}

// achievedCutHarness runs the drop of TestImprovementCutToAchieved.
func achievedCutHarness(t *testing.T, cut, recovery bool) *harness {
	t.Helper()
	cfg := exampleConfig()
	cfg.Improvements.CutToAchieved = cut
	cfg.Improvements.FastRecovery = recovery
	h := newHarness(t, cfg)
	h.load(200, 19_000, 500) // high: 95 % of 20 000
	h.load(400, 6_000, 500)  // the link now delivers 6 Mbit/s
	h.load(600, 6_000, 500)
	bloat(h, 650)
	return h
}

// bloat fills the window with 75 ms deltas and delivers one more delayed
// reply at ms: a full-strength cut.
func bloat(h *harness, ms float64) {
	fillWindow(h.c, 75_000, 75_000, 75_000, 75_000, 75_000)
	h.rtt(ms, 0, 2*time.Duration(h.c.slots[0].base[0])*time.Microsecond+150*time.Millisecond)
}

// TestImprovementBaseRecovery: 10 000 kbit/s below a 20 000 base under low
// load with a clean window. Upstream's recovery step is ×1.01 (10 100);
// with the switch it goes a quarter of the way to base (12 500).
func TestImprovementBaseRecovery(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Download.Start = 10_000_000
		cfg.Improvements.BaseRecovery = on
		h := newHarness(t, cfg)
		h.load(200, 3_000, 3_000) // low load
		h.rtt(1050, 0, cleanRTT)
		want := int64(10_100)
		if on {
			want = 12_500
		}
		if got := h.rateK(dn); got != want {
			t.Errorf("on=%v: download %d kbit/s; want %d", on, got, want)
		}
	}
}

// cleanIncreases delivers at each of times (ms) a clean response from
// slot 0, 100 ms after a high-load sample of down kbit/s (a fresh one;
// the window is emptied before the first), and returns the download rate
// after each.
func cleanIncreases(h *harness, times []float64, down int64) []int64 {
	var got []int64
	for i, ms := range times {
		h.load(ms-100, down, 500)
		if i == 0 {
			fillWindow(h.c, 0, 0, 0, 0, 0, 0)
		}
		h.rtt(ms, 0, 2*time.Duration(h.c.slots[0].base[0])*time.Microsecond)
		got = append(got, h.rateK(dn))
	}
	return got
}

// TestImprovementPlateauHold: after the achieved cut to 5 400 kbit/s (the
// link showed 6 000) a clean window climbs to 95 % of 6 000 = 5 700 and
// stops there; at the plateau the next increase is nothing, and one 1.5 s
// later a quarter of upstream's step. Upstream climbs ×1.04 every time.
func TestImprovementPlateauHold(t *testing.T) {
	for _, on := range []bool{false, true} {
		h := achievedCutHarness(t, true, false)
		h.c.cfg.Improvements.PlateauHold = on
		got := cleanIncreases(h, []float64{1000, 1200, 1400, 2900}, 6_000)
		want := []int64{5_616, 5_840, 6_073, 6_315}
		if on {
			// 5 616 (upstream's step beats halfway), 5 700 (capped at the
			// plateau), 5 700 (τ = 0 at the plateau), 5 700 + 228/4 = 5 757.
			want = []int64{5_616, 5_700, 5_700, 5_757}
		}
		if !slices.Equal(got, want) {
			t.Errorf("on=%v: download %v kbit/s; want %v", on, got, want)
		}
	}
}

// TestImprovementPeakRecovery: the pipe carried 20 000 kbit/s cleanly,
// then the link dropped to 6 000 and the achieved cut took the rate to
// 5 400. Back at full capacity, clean increases in a row double their step
// every second one (at most ×1.25), up to 90 % of the 20 000 peak; upstream
// climbs ×1.04 each time.
func TestImprovementPeakRecovery(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Improvements.CutToAchieved = true
		cfg.Improvements.PeakRecovery = on
		h := newHarness(t, cfg)
		h.load(350, 19_000, 500)
		h.rtt(400, 0, cleanRTT) // a clean increase at 20 000: the peak
		h.load(550, 6_000, 500)
		h.load(750, 6_000, 500)
		bloat(h, 800)
		if h.rateK(dn) != 5_400 {
			t.Fatalf("on=%v: setup: download %d after the cut, want 5400", on, h.rateK(dn))
		}
		got := cleanIncreases(h, []float64{1200, 1400, 1600, 1800, 2000, 2200, 2400, 2600}, 30_000)
		want := []int64{5_616, 5_840, 6_073, 6_315, 6_567, 6_829, 7_102, 7_386}
		if on {
			// Steps ×1, ×2, ×2, ×4, ×4, ×8 (capped at ×1.25), …
			want = []int64{5_616, 6_064, 6_548, 7_592, 8_804, 11_005, 13_756, 17_195}
		}
		if !slices.Equal(got, want) {
			t.Errorf("on=%v: download %v kbit/s; want %v", on, got, want)
		}
	}
}

// TestImprovementOutageHold: a saturating download whose link stops
// delivering (100 kbit/s of a 20 000 pipe) while the delay is high. The
// cut upstream makes is held off for up to 5 s with the switch.
func TestImprovementOutageHold(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Improvements.CutToAchieved = true
		cfg.Improvements.OutageHold = on
		h := newHarness(t, cfg)
		h.load(200, 19_000, 500) // high
		h.load(400, 100, 100)    // the link goes silent
		h.load(600, 100, 100)
		bloat(h, 650)
		held := h.rateK(dn) == 20_000
		if held != on {
			t.Errorf("on=%v: download %d kbit/s after bloat in an outage; held %v", on, h.rateK(dn), held)
		}
		if !on {
			continue
		}
		// Six seconds into the outage it is a low capacity: cut.
		for ms := 800.0; ms <= 5800; ms += 200 {
			h.load(ms, 100, 100)
		}
		bloat(h, 5850)
		if h.rateK(dn) >= 20_000 {
			t.Errorf("after 5.2 s of outage: download %d kbit/s; want a cut", h.rateK(dn))
		}
	}
}

// TestImprovementDirectionalCut: both directions saturate; the download's
// link delivers 19 600 of its 20 000 (its own pipe holds it back), the
// upload's only 16 000 of 20 000: the round trip's bloat is the upload's.
// Upstream cuts both; with the switch only the upload, and with the
// download alone saturating (the upload carries acks) only the download.
func TestImprovementDirectionalCut(t *testing.T) {
	for _, on := range []bool{false, true} {
		for _, tc := range []struct {
			name           string
			downK, upK     int64
			cutDown, cutUp bool
		}{
			{"upload's queue", 19_600, 16_000, false, true},
			{"download alone saturating", 19_600, 1_000, true, false},
		} {
			cfg := exampleConfig()
			cfg.Improvements.DirectionalCut = on
			h := newHarness(t, cfg)
			h.load(200, tc.downK, tc.upK)
			h.load(400, tc.downK, tc.upK)
			bloat(h, 450)
			cutDown, cutUp := h.rateK(dn) < 20_000, h.rateK(up) < 20_000
			wantDown, wantUp := true, true
			if on {
				wantDown, wantUp = tc.cutDown, tc.cutUp
			}
			if cutDown != wantDown || cutUp != wantUp {
				t.Errorf("on=%v, %s: download %d, upload %d kbit/s; want cut %v/%v", on, tc.name, h.rateK(dn), h.rateK(up), wantDown, wantUp)
			}
		}
	}
}

// TestImprovementDrainCut: the achieved cut of TestImprovementCutToAchieved
// (the link shows 6 000 kbit/s) goes to 0.9 × 6 000 = 5 400 without the
// switch, whatever the queue. With it, a 75 ms window average still cuts
// to 5 400 (1 − 75 ms/1 s is above AchievedCut), 300 ms (an average of
// 299.95 ms: the baseline crept up) to 0.701 × 6 000 = 4 206, and 600 ms
// to the floor, half: 3 000.
func TestImprovementDrainCut(t *testing.T) {
	for _, on := range []bool{false, true} {
		for _, tc := range []struct {
			delta    int64 // µs, every window entry
			want, on int64
		}{{75_000, 5_400, 5_400}, {300_000, 5_400, 4_206}, {600_000, 5_400, 3_000}} {
			cfg := exampleConfig()
			cfg.Improvements.CutToAchieved = true
			cfg.Improvements.DrainCut = on
			cfg.Download.Min, cfg.ConnectionActive = 1_000_000, 1_000_000
			h := newHarness(t, cfg)
			h.load(200, 19_000, 500)
			h.load(400, 6_000, 500)
			h.load(600, 6_000, 500)
			fillWindow(h.c, tc.delta, tc.delta, tc.delta, tc.delta, tc.delta)
			h.rtt(650, 0, 2*time.Duration(h.c.slots[0].base[0]+tc.delta)*time.Microsecond)
			want := tc.want
			if on {
				want = tc.on
			}
			if got := h.rateK(dn); got != want {
				t.Errorf("on=%v, %d ms queue: download %d kbit/s; want %d", on, tc.delta/1000, got, want)
			}
		}
	}
}

// TestImprovementWholeRTT: an echo reply 40 ms above the baseline round
// trip is a 20 ms one-way delta upstream (no vote at 30 ms) and a 40 ms
// one with the switch (a vote); a one-way sample is the same either way.
func TestImprovementWholeRTT(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Improvements.WholeRTT = on
		h := newHarness(t, cfg)
		for i := range 6 {
			h.rtt(50*float64(i+1), 0, 40*time.Millisecond) // settle the baseline at 20 ms
		}
		h.rtt(400, 0, 80*time.Millisecond)
		if got := h.c.dir[dn].nDelayed; got != map[bool]int{false: 0, true: 1}[on] {
			t.Errorf("on=%v: %d delayed samples after a 40 ms rise of the round trip", on, got)
		}
		h.owd(450, 0, OneWay, 60*time.Millisecond, 20*time.Millisecond)
		if d := h.c.dir[up].deltas[(h.c.winPos+5)%6]; d > 1000 {
			t.Errorf("on=%v: one-way upload delta %d µs; want about 0 (unchanged)", on, d)
		}
	}
}

// TestImprovementJitterThreshold: on a steady path (replies within ±0.5 ms)
// the switch lowers the delay threshold to its floor (a fifth: 6 ms), so a
// 15 ms rise (one-way) votes, where upstream's 30 ms does not; a path whose replies
// jitter by up to 30 ms one way keeps the configured threshold; and a queue that grows
// at a steady 2 ms per reply does not count as jitter.
func TestImprovementJitterThreshold(t *testing.T) {
	// Every reflector sees the same path; noise differs reply by reply.
	noise := func(i int, max time.Duration) time.Duration {
		return time.Duration((uint64(i)*2654435761)%1000) * max / 1000
	}
	steady := func(i int) time.Duration { return 40*time.Millisecond + noise(i, time.Millisecond) }
	noisy := func(i int) time.Duration { return 40*time.Millisecond + noise(i, 60*time.Millisecond) }
	for _, tc := range []struct {
		name      string
		on        bool
		rtt       func(i int) time.Duration
		threshold time.Duration // one-way delay threshold in force
	}{
		{"upstream, steady", false, steady, 30 * time.Millisecond},
		{"steady", true, steady, 6 * time.Millisecond},
		{"noisy", true, noisy, 30 * time.Millisecond},
	} {
		cfg := exampleConfig()
		cfg.Improvements.JitterThreshold = tc.on
		h := newHarness(t, cfg)
		ms := 0.0
		for i := range 100 {
			ms += 50
			h.rtt(ms, i%6, tc.rtt(i))
		}
		if got := usDuration(h.c.dir[dn].tDelay); !near(got, tc.threshold) {
			t.Errorf("%s: threshold %v, want %v", tc.name, got, tc.threshold)
		}
		if got := usDuration(h.c.dir[dn].tUp); !near(got, tc.threshold*10/30) {
			t.Errorf("%s: full-increase threshold %v, want it scaled alike: %v", tc.name, got, tc.threshold/3)
		}
		if got := usDuration(h.c.dir[dn].tDown); got != 60*time.Millisecond {
			t.Errorf("%s: full-cut threshold %v, want the configured 60ms: the queue's size says how hard to cut", tc.name, got)
		}
	}
	// A queue growing 2 ms a reply (a steady overload) is no jitter: the
	// threshold stays at its floor while it grows.
	cfg := exampleConfig()
	cfg.Improvements.JitterThreshold = true
	h := newHarness(t, cfg)
	ms := 0.0
	for i := range 100 {
		ms += 50
		h.rtt(ms, i%6, steady(i))
	}
	for i := range 20 {
		ms += 50
		h.rtt(ms, i%6, 40*time.Millisecond+time.Duration(4*(i+1))*time.Millisecond)
	}
	if got := usDuration(h.c.dir[dn].tDelay); !near(got, 6*time.Millisecond) {
		t.Errorf("growing queue: threshold %v, want the floor 6ms", got)
	}
	if h.c.dir[dn].nDelayed < 3 {
		t.Errorf("a one-way rise of up to 40 ms voted %d times; want bufferbloat", h.c.dir[dn].nDelayed)
	}
}

// near reports whether a threshold is b within the 0.1 % rounding of the
// law's thousandths.
func near(a, b time.Duration) bool {
	return a >= b-b/1000-time.Microsecond && a <= b+b/1000+time.Microsecond
}

// TestImprovementSilentBackoff: with no reflector answering and traffic
// both ways (so no stall), upstream replaces a slot every second or so
// for as long as it lasts; SilentBackoff replaces each slot once at that
// pace, then spaces the replacements out, doubling up to
// SilentBackoffMax, and a response brings the normal pace back.
func TestImprovementSilentBackoff(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := exampleConfig()
		cfg.Improvements.SilentBackoff = on
		h := newHarness(t, cfg)
		swaps := func(from, to float64) (n int) {
			for ms := from; ms < to; ms += 200 {
				if e, ok := hasEvent(h.load(ms, 5000, 5000), EventReflectorReplaced); ok && e.Cause == CauseOffences {
					n++
				}
			}
			return n
		}
		first := swaps(200, 60_000)
		later := swaps(60_000, 20*60_000)
		t.Logf("on=%v: %d replacements in the first minute, %d in the next 19", on, first, later)
		if h.c.State().Status == StatusStalled {
			t.Fatalf("on=%v: stalled with traffic both ways", on)
		}
		if !on {
			if later < 200 {
				t.Errorf("upstream: %d replacements in minutes 1-20 with every reflector silent; want one every few seconds", later)
			}
			continue
		}
		if n := len(cfg.Reflectors); first < n || first > n+6 {
			t.Errorf("on: %d replacements in the first minute, want the pool's %d at the normal pace, then 2 s, 4 s, 8 s … apart", first, n)
		}
		// 2 s, 4 s, … 256 s, then every 300 s: a handful in 19 minutes.
		if later > 10 {
			t.Errorf("on: %d replacements in minutes 1-20 with every reflector silent; want them spaced out (at most 16)", later)
		}
		// The network is back: every slot answers, and none is replaced
		// for the offences the outage gave it.
		back := 0
		for ms := 20*60_000.0 + 50; ms < 21*60_000; ms += 50 {
			out := h.rtt(ms, int(ms/50)%cfg.Pingers, cleanRTT)
			if e, ok := hasEvent(out, EventReflectorReplaced); ok && e.Cause == CauseOffences {
				back++
			}
			if int(ms)%200 == 0 {
				if e, ok := hasEvent(h.load(ms, 5000, 5000), EventReflectorReplaced); ok && e.Cause == CauseOffences {
					back++
				}
			}
		}
		if back > 0 {
			t.Errorf("on: %d slots replaced for missed health checks in the minute after every reflector answered again", back)
		}
		// Silent slots are replaced at the normal pace again.
		if n := swaps(21*60_000, 21*60_000+30_000); n < 5 {
			t.Errorf("on: %d replacements in the 30 s of silence after the network was back; want the normal pace back", n)
		}
	}
}
