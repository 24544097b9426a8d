// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"errors"
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

func TestDefaultConfigIsFaithful(t *testing.T) {
	if (DefaultConfig().Improvements != Improvements{}) {
		t.Errorf("DefaultConfig has improvements switched on: %+v", DefaultConfig().Improvements)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig invalid: %v", err)
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
