// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/controller/tuning"
)

// Every kind of bad input has a defined behaviour (documented on Delay and
// Load) and never panics.

func TestRejectedDelaySamplesAreTreatedLikeLoss(t *testing.T) {
	h := newHarness(t, exampleConfig())
	r0 := h.c.slots[0].addr
	now := atMS(1000)
	for _, tc := range []struct {
		name string
		s    DelaySample
	}{
		{"negative RTT", RTTSample(r0, now, -5*time.Millisecond)},
		{"RTT over a minute", RTTSample(r0, now, 2*time.Minute)},
		{"negative half RTT given directly", DelaySample{Reflector: r0, At: now, DownOWD: -time.Millisecond, Method: RTTHalf}},
		{"one-way delay beyond 48 h", DelaySample{Reflector: r0, At: now, DownOWD: 49 * time.Hour}},
		{"one-way delay beyond −48 h", DelaySample{Reflector: r0, At: now, UpOWD: -49 * time.Hour, Method: OneWay}},
		{"max duration", DelaySample{Reflector: r0, At: now, DownOWD: math.MaxInt64, UpOWD: math.MinInt64}},
		{"no reflector", DelaySample{At: now, DownOWD: time.Millisecond}},
		{"no receive time", DelaySample{Reflector: r0, DownOWD: time.Millisecond}},
		{"from the future", DelaySample{Reflector: r0, At: now.Add(time.Millisecond), DownOWD: time.Millisecond}},
		{"unknown method", DelaySample{Reflector: r0, At: now, DownOWD: time.Millisecond, Method: 99}},
	} {
		before := h.c.counters.RejectedSamples
		pos, base := h.c.winPos, h.c.slots[0].base
		out := h.c.Delay(now, tc.s)
		if h.c.counters.RejectedSamples != before+1 {
			t.Errorf("%s: not counted as rejected", tc.name)
		}
		if h.c.winPos != pos || h.c.slots[0].base != base || len(out.Decisions()) != 0 {
			t.Errorf("%s: changed the window, baselines or rates", tc.name)
		}
	}
	// Rejected samples are not responses: the stall test still runs.
	if st := h.c.State(); st.Status != StatusStalled {
		t.Errorf("a stream of invalid samples and no traffic: status %v; want stalled", st.Status)
	}
}

func TestNegativeOneWayDelaysAreValidForTimestamps(t *testing.T) {
	h := newHarness(t, exampleConfig())
	h.owd(10, 0, ICMPTimestamp, -17*time.Millisecond, 30*time.Millisecond)
	if h.c.counters.RejectedSamples != 0 || h.c.counters.Responses != 1 {
		t.Errorf("negative OWD from unsynchronised clocks rejected")
	}
}

func TestForeignReflectorIsIgnored(t *testing.T) {
	h := newHarness(t, exampleConfig())
	out := h.c.Delay(atMS(10), RTTSample(netip.MustParseAddr("192.0.2.1"), atMS(10), time.Second))
	if h.c.counters.ForeignResponses != 1 || h.c.winPos != 0 || len(out.Decisions()) != 0 {
		t.Errorf("response from a reflector outside the slots was processed")
	}
	// An IPv4-mapped IPv6 form of an active reflector is the same reflector.
	mapped := netip.AddrFrom16(h.c.slots[0].addr.As16())
	h.c.Delay(atMS(20), RTTSample(mapped, atMS(20), 40*time.Millisecond))
	if h.c.counters.Responses != 1 {
		t.Errorf("IPv4-mapped address not matched to its slot")
	}
}

func TestOutOfOrderSamples(t *testing.T) {
	h := newHarness(t, exampleConfig())
	h.rtt(1000, 0, cleanRTT)
	// Received earlier than the previous one, handled later: processed (it
	// is fresh enough), but the last-response time does not go backwards.
	out := h.c.Delay(atMS(1010), RTTSample(h.c.slots[0].addr, atMS(900), cleanRTT))
	if h.c.counters.Responses != 2 || h.c.lastResp != msUS(1000) || h.c.slots[0].lastResp != msUS(1000) {
		t.Errorf("out-of-order sample: responses %d, last response %d/%d; want 2, 1000 ms", h.c.counters.Responses, h.c.lastResp, h.c.slots[0].lastResp)
	}
	_ = out
	// A `now` earlier than one already seen does not turn the clock back,
	// so it cannot reopen a refractory period.
	h.c.Tick(atMS(5000))
	h.c.Tick(atMS(100))
	if h.c.now != msUS(5000) {
		t.Errorf("clock went back to %d", h.c.now)
	}
}

func TestCounterWrapResetAndJumps(t *testing.T) {
	const u32 = 1 << 32
	h := newHarness(t, exampleConfig())
	// A 32-bit counter wraps: the advance across the wrap is the rate.
	h.c.Load(atMS(200), LoadSample{At: atMS(200), RxBytes: u32 - 100_000})
	h.c.Load(atMS(400), LoadSample{At: atMS(400), RxBytes: 300_000})
	if st := h.c.State(); st.Download.Achieved != 16_000_000 || st.Counters.CounterWraps != 1 {
		t.Errorf("32-bit wrap: %d bit/s, %d wraps; want 16 Mbit/s (400000 bytes), 1", st.Download.Achieved, st.Counters.CounterWraps)
	}
	// Backwards from a small value by an implausible amount: a reset.
	h.c.Load(atMS(600), LoadSample{At: atMS(600), RxBytes: 299_000})
	if st := h.c.State(); st.Download.Achieved != 0 || st.Counters.CounterResets != 1 {
		t.Errorf("reset below 4 GiB: %d bit/s, %d resets; want 0, 1", st.Download.Achieved, st.Counters.CounterResets)
	}
	// A forward jump of more than 1 TiB in one sample is a reset too.
	h.c.Load(atMS(800), LoadSample{At: atMS(800), RxBytes: 299_000 + 1<<41})
	if st := h.c.State(); st.Download.Achieved != 0 || st.Counters.CounterResets != 2 {
		t.Errorf("absurd jump: %d bit/s, %d resets; want 0, 2", st.Download.Achieved, st.Counters.CounterResets)
	}
	// Extremes do not overflow.
	h.c.Load(atMS(1000), LoadSample{At: atMS(1000), RxBytes: math.MaxUint64, TxBytes: math.MaxUint64, RxPackets: math.MaxUint64})
	h.c.Load(atMS(1200), LoadSample{At: atMS(1200), RxBytes: 0, TxBytes: math.MaxUint64, RxPackets: 0})
	if st := h.c.State(); st.Download.Achieved < 0 || st.Upload.Achieved != 0 {
		t.Errorf("extremes: %d / %d", st.Download.Achieved, st.Upload.Achieved)
	}
}

func TestLoadSamplesOutOfOrderOrFromTheFuture(t *testing.T) {
	h := newHarness(t, exampleConfig())
	h.c.Load(atMS(200), LoadSample{At: atMS(200), RxBytes: 100_000})
	// Older than the previous read: dropped, the reference stays.
	h.c.Load(atMS(300), LoadSample{At: atMS(150), RxBytes: 900_000})
	// From the future: dropped.
	h.c.Load(atMS(300), LoadSample{At: atMS(350), RxBytes: 900_000})
	// Missing time: dropped.
	h.c.Load(atMS(300), LoadSample{RxBytes: 900_000})
	h.c.Load(atMS(400), LoadSample{At: atMS(400), RxBytes: 200_000})
	st := h.c.State()
	if st.Counters.RejectedLoadSamples != 3 || st.Download.Achieved != 4_000_000 {
		t.Errorf("rejected %d, achieved %d bit/s; want 3 and 4 Mbit/s against the kept reference", st.Counters.RejectedLoadSamples, st.Download.Achieved)
	}
}

func TestReflectorWithConstantHugeDelay(t *testing.T) {
	// One of six reflectors answers every echo 5 s late (a broken or
	// rate-limited reflector). It gets one vote in six, so it never flags
	// bufferbloat on its own; the comparison replaces it within a minute.
	h := newHarness(t, exampleConfig())
	bad := h.c.slots[3].addr
	cuts := 0
	var replacedAt float64
	for i, ms := 0, 10.0; ms < 70000; i, ms = i+1, ms+50 {
		p := i % 6
		r := cleanRTT
		if h.c.slots[p].addr == bad {
			r = 5 * time.Second
		}
		if int(ms)%200 == 10 {
			h.load(ms, 16000, 16000)
		}
		out := h.rtt(ms, p, r)
		for _, d := range out.Decisions() {
			if d.Reason == ReasonCut {
				cuts++
			}
		}
		if e, ok := hasEvent(out, EventReflectorReplaced); ok && e.Old == bad {
			replacedAt = ms
			break
		}
	}
	if cuts != 0 {
		t.Errorf("%d cuts caused by one slow reflector", cuts)
	}
	if replacedAt == 0 || replacedAt > 61000 {
		t.Errorf("slow reflector replaced at %v ms; want at the first comparison (~60 s)", replacedAt)
	}
}

func TestReportApplyWithBadDirection(t *testing.T) {
	cfg := exampleConfig()
	cfg.Improvements.SurfaceBackendErrors = true
	h := newHarness(t, cfg)
	h.c.ReportApply(-1, nil)
	h.c.ReportApply(7, nil)
}

func TestInputsBeforeStartStartTheController(t *testing.T) {
	c, err := New(exampleConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := c.Tick(t0)
	if len(out.Decisions()) != 2 {
		t.Errorf("first input did not apply the start rates: %v", out.Decisions())
	}
	st := c.State()
	if st.Status != StatusIdle || len(st.Reflectors) != 6 {
		t.Errorf("state %+v", st)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*tuning.Config)
		want string
	}{
		{"min too low", func(c *tuning.Config) { c.Download.Min = 10 }, "download.min"},
		{"rates out of order", func(c *tuning.Config) { c.Upload.Base = 50_000_000 }, "upload: min"},
		{"max too high", func(c *tuning.Config) { c.Download.Max = 2 * tuning.MaxRate }, "download.max"},
		{"negative threshold", func(c *tuning.Config) { c.Upload.DelayThreshold = -time.Millisecond }, "upload.delay_threshold"},
		{"votes above window", func(c *tuning.Config) { c.BufferbloatVotes = 7 }, "bufferbloat votes"},
		{"window too large", func(c *tuning.Config) { c.BufferbloatWindow = 100 }, "bufferbloat window"},
		{"high load", func(c *tuning.Config) { c.HighLoad = 1.5 }, "high load"},
		{"active above min", func(c *tuning.Config) { c.ConnectionActive = 6_000_000 }, "connection active"},
		{"cut factors", func(c *tuning.Config) { c.StrongestCut = 0.995 }, "cut factors"},
		{"increase factors", func(c *tuning.Config) { c.LargestIncrease = 0.9 }, "increase factors"},
		{"alpha", func(c *tuning.Config) { c.AlphaDeltaEWMA = 0 }, "alpha delta EWMA"},
		{"no reflectors", func(c *tuning.Config) { c.Reflectors = nil }, "pingers 6"},
		{"duplicate reflector", func(c *tuning.Config) { c.Reflectors[1] = c.Reflectors[0] }, "listed twice"},
		{"invalid reflector", func(c *tuning.Config) { c.Reflectors[2] = netip.Addr{} }, "reflector 3"},
		{"zero ping interval", func(c *tuning.Config) { c.PingInterval = 0 }, "ping interval"},
		{"responses too dense", func(c *tuning.Config) { c.PingInterval = 5 * time.Millisecond }, "under 1ms"},
		{"overhead", func(c *tuning.Config) { c.Overhead = 300 }, "overhead"},
		{"mode", func(c *tuning.Config) { c.Mode = 9 }, "mode"},
	} {
		cfg := exampleConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one mentioning %q", tc.name, err, tc.want)
			continue
		}
		if _, err := New(cfg, nil); err == nil {
			t.Errorf("%s: New accepted an invalid config", tc.name)
		}
	}
	// All problems at once.
	cfg := exampleConfig()
	cfg.Download.Min, cfg.Overhead = 0, -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "download.min") || !strings.Contains(err.Error(), "overhead") {
		t.Errorf("multiple problems: %v", err)
	}
}
