// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/controller/tuning"
)

func TestAutorateStartsFromKnownGoodRate(t *testing.T) {
	cfg := exampleConfig()
	cfg.Download.Start = 30_000_000
	cfg.Upload.Start = 90_000_000 // above max: clamped
	h := newHarness(t, cfg)
	dd, _ := decision(h.lastOut, dn)
	du, _ := decision(h.lastOut, up)
	if dd.Rate != 30_000_000 || du.Rate != 35_000_000 {
		t.Fatalf("start: %v, %v; want 30 Mbit/s and the 35 Mbit/s max", dd, du)
	}
	// Under low load it decays toward base, not toward the start rate.
	h.load(1000, 3000, 3000)
	if d, ok := decision(h.rtt(1050, 0, cleanRTT), dn); !ok || d.Reason != ReasonDecay || d.Rate != 29_700_000 {
		t.Errorf("first decay: %v; want 29700 kbit/s toward base", d)
	}
}

// balancedRun drives a balanced controller through clean, bloated and
// clean phases with echo replies every 50 ms, round-robin over the slots,
// and load samples every 200 ms.
type phase struct {
	until      float64
	rtt        time.Duration
	downK, upK int64
}

func drive(h *harness, from float64, phases []phase, each func(ms float64, out Output)) {
	ms := from
	i := 0
	for _, ph := range phases {
		for ; ms < ph.until; ms += 50 {
			if int(ms)%200 == 0 {
				each(ms, h.load(ms, ph.downK, ph.upK))
			}
			each(ms, h.rtt(ms+1, i%len(h.c.slots), ph.rtt))
			i++
		}
	}
}

func TestBalancedEngagesOnStandingQueueAndReleasesWhenClean(t *testing.T) {
	cfg := exampleConfig()
	cfg.Mode = tuning.ModeBalanced
	h := newHarness(t, cfg)
	if len(h.lastOut.Decisions()) != 0 {
		t.Fatalf("balanced start applied rates: %v", h.lastOut.Decisions())
	}

	var engagedAt, releasedAt float64
	var engage, release Event
	var firstRates []Decision
	var decisionsBefore int
	drive(h, 0, []phase{
		{until: 5000, rtt: cleanRTT, downK: 3000, upK: 3000},
		{until: 12000, rtt: bloatRTT, downK: 30000, upK: 3000},
		{until: 40000, rtt: cleanRTT, downK: 3000, upK: 3000},
	}, func(ms float64, out Output) {
		if e, ok := hasEvent(out, EventEngage); ok && engagedAt == 0 {
			engagedAt, engage = ms, e
			firstRates = append(firstRates, out.Decisions()...)
		}
		if e, ok := hasEvent(out, EventRelease); ok && releasedAt == 0 {
			releasedAt, release = ms, e
		}
		if engagedAt == 0 {
			decisionsBefore += len(out.Decisions())
		}
	})
	if decisionsBefore != 0 {
		t.Errorf("%d decisions before engaging; want none (no shaping)", decisionsBefore)
	}
	if engagedAt == 0 {
		t.Fatalf("never engaged")
	}
	// The queue is flagged from the third bloated response (5100 ms); four
	// seconds later it engages.
	if engage.Duration != 4*time.Second || engagedAt != 9100 {
		t.Errorf("engaged at %v ms after %v; want 9100 ms after 4s", engagedAt, engage.Duration)
	}
	if engage.Delay < 30*time.Millisecond || engage.Delay > 45*time.Millisecond {
		t.Errorf("engage delay %v; want the ~40 ms one-way standing delay", engage.Delay)
	}
	want := fmt.Sprintf("standing queue for 4s (delay +%.1f ms one-way) - engaging shaper", float64(engage.Delay)/1e6)
	if engage.String() != want {
		t.Errorf("log line %q; want %q", engage.String(), want)
	}
	if len(firstRates) != 2 || firstRates[0].Reason != ReasonEngage || firstRates[0].Rate != 20_000_000 {
		t.Errorf("engage decisions %v; want both start rates", firstRates)
	}
	if releasedAt == 0 {
		t.Fatalf("never released")
	}
	if release.Duration != 20*time.Second || release.String() != "latency clean for 20s - releasing shaper" {
		t.Errorf("release after %v: %q", release.Duration, release.String())
	}
	if h.c.Engaged() || h.c.State().Shaping {
		t.Errorf("still shaping after release")
	}
}

func TestBalancedLogLinesFormatRealValues(t *testing.T) {
	e := Event{Kind: EventEngage, Duration: 4 * time.Second, Delay: 18500 * time.Microsecond}
	if got := e.String(); got != "standing queue for 4s (delay +18.5 ms one-way) - engaging shaper" {
		t.Errorf("engage: %q", got)
	}
	e = Event{Kind: EventEngage, Duration: 4050 * time.Millisecond, Delay: 7240 * time.Microsecond}
	if got := e.String(); got != "standing queue for 4.1s (delay +7.2 ms one-way) - engaging shaper" {
		t.Errorf("engage with other values: %q", got)
	}
	r := Event{Kind: EventRelease, Duration: 20 * time.Second}
	if got := r.String(); got != "latency clean for 20s - releasing shaper" {
		t.Errorf("release: %q", got)
	}
}

func TestBalancedStaysEngagedWhileTheShaperHoldsASaturatedLink(t *testing.T) {
	cfg := exampleConfig()
	cfg.Mode = tuning.ModeBalanced
	cfg.EngageAfter = 0
	h := newHarness(t, cfg)
	drive(h, 0, []phase{
		{until: 1000, rtt: cleanRTT, downK: 3000, upK: 3000},
		{until: 2000, rtt: bloatRTT, downK: 30000, upK: 3000},
	}, func(float64, Output) {})
	if !h.c.Engaged() {
		t.Fatalf("did not engage")
	}
	// Clean latency with the download saturating whatever rate the shaper
	// allows: it stays engaged while below max, and releases 20 s after
	// reaching max.
	var reachedMax, released float64
	for i, ms := 0, 2000.0; ms < 60000; i, ms = i+1, ms+50 {
		if int(ms)%200 == 0 {
			h.load(ms, h.rateK(dn)*9/10, 3000)
		}
		out := h.rtt(ms+1, i%6, 70*time.Millisecond)
		if reachedMax == 0 && h.rateK(dn) == 80000 {
			reachedMax = ms
		}
		if _, ok := hasEvent(out, EventRelease); ok {
			released = ms
			break
		}
	}
	t.Logf("max reached at %v ms, released at %v ms", reachedMax, released)
	if reachedMax == 0 {
		t.Fatalf("the download never reached max; rate %d", h.rateK(dn))
	}
	if released == 0 || released < reachedMax+20000 || released > reachedMax+20500 {
		t.Errorf("released at %v ms, max reached at %v ms; want release 20 s after reaching max", released, reachedMax)
	}
}

func TestFixedAndOffModesOnlyObserve(t *testing.T) {
	for _, m := range []tuning.Mode{tuning.ModeFixed, tuning.ModeOff} {
		cfg := exampleConfig()
		cfg.Mode = m
		h := newHarness(t, cfg)
		n := len(h.lastOut.Decisions())
		drive(h, 0, []phase{
			{until: 3000, rtt: bloatRTT, downK: 19000, upK: 19000},
			{until: 6000, rtt: cleanRTT, downK: 19000, upK: 19000},
		}, func(ms float64, out Output) { n += len(out.Decisions()) })
		st := h.c.State()
		if n != 0 || st.Shaping {
			t.Errorf("%s: %d decisions, shaping %v; want none", m, n, st.Shaping)
		}
		if st.Download.Rate != 20_000_000 || st.Upload.Rate != 20_000_000 {
			t.Errorf("%s: rates %d/%d; want the configured 20 Mbit/s", m, st.Download.Rate, st.Upload.Rate)
		}
		if st.Counters.Responses == 0 || st.Download.Baseline > 21*time.Millisecond {
			t.Errorf("%s: not observing: %d responses, baseline %v", m, st.Counters.Responses, st.Download.Baseline)
		}
		if want := m == tuning.ModeFixed; h.c.Engaged() != want {
			t.Errorf("%s: engaged %v; want %v", m, h.c.Engaged(), want)
		}
	}
}

func TestEnumsReadAsTextInJSON(t *testing.T) {
	var m tuning.Mode
	if err := m.UnmarshalText([]byte("balanced")); err != nil || m != tuning.ModeBalanced {
		t.Errorf("UnmarshalText(balanced) = %v, %v", m, err)
	}
	if err := m.UnmarshalText([]byte("auto")); err == nil {
		t.Errorf("UnmarshalText(auto) accepted")
	}
	h := newHarness(t, exampleConfig())
	b, err := json.Marshal(h.c.State())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Mode":"autorate"`, `"Status":"idle"`, `"Load":"idle"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("state JSON lacks %s: %s", want, b)
		}
	}
}

// TestEnumNames: every enum prints its name, and a value without one its
// type and number, so a bad value in a log line is still legible.
func TestEnumNames(t *testing.T) {
	for _, tc := range []struct {
		got  fmt.Stringer
		want string
	}{
		{ReasonCut, "cut"},
		{Reason(99), "Reason(99)"},
		{CauseRotation, "periodic rotation"},
		{ReplaceCause(0), "ReplaceCause(0)"},
		{StatusSleeping, "sleeping"},
		{Status(7), "Status(7)"},
		{LoadHigh, "high"},
		{LoadClass(3), "LoadClass(3)"},
	} {
		if s := tc.got.String(); s != tc.want {
			t.Errorf("%#v prints %q, want %q", tc.got, s, tc.want)
		}
	}
}
