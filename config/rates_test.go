// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"testing"
	"time"

	"github.com/macake/macake/config/units"
	"github.com/macake/macake/shape"
)

// TestDefaultsAreCakeAutorates pins every default under the upstream law
// to reference/autorate.md §3 (upstream defaults.sh): changing one must be
// a deliberate act.
func TestDefaultsAreCakeAutorates(t *testing.T) {
	up := DefaultsFor(LawUpstream)
	a, in := up.Autorate, up.Autorate.Internal
	ms := time.Millisecond
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"base_dl_shaper_rate_kbps", up.Shaper.Download.Rate, 20000 * units.Kbit},
		{"base_ul_shaper_rate_kbps", up.Shaper.Upload.Rate, 20000 * units.Kbit},
		{"min_dl_shaper_rate_kbps", a.Download.Min, 5000 * units.Kbit},
		{"max_dl_shaper_rate_kbps", a.Download.Max.Rate, 80000 * units.Kbit},
		{"min_ul_shaper_rate_kbps", a.Upload.Min, 5000 * units.Kbit},
		{"max_ul_shaper_rate_kbps", a.Upload.Max.Rate, 35000 * units.Kbit},
		{"dl_owd_delta_delay_thr_ms", a.DelayThreshold.Std(), 30 * ms},
		{"dl_avg_owd_delta_max_adjust_up_thr_ms", a.FullIncreaseBelow.Std(), 10 * ms},
		{"dl_avg_owd_delta_max_adjust_down_thr_ms", a.FullCutAbove.Std(), 60 * ms},
		{"bufferbloat_detection_window", a.BufferbloatWindow, 6},
		{"bufferbloat_detection_thr", a.BufferbloatSamples, 3},
		{"high_load_thr", a.HighLoad, 0.75},
		{"connection_active_thr_kbps", a.ActiveThreshold, 2000 * units.Kbit},
		{"shaper_rate_min_adjust_down_bufferbloat", in.MinCut, 0.99},
		{"shaper_rate_max_adjust_down_bufferbloat", a.MaxCut, 0.75},
		{"shaper_rate_min_adjust_up_load_high", in.MinIncrease, 1.0},
		{"shaper_rate_max_adjust_up_load_high", a.MaxIncrease, 1.04},
		{"shaper_rate_adjust_down_load_low", in.Decay, 0.99},
		{"shaper_rate_adjust_up_load_low", in.Recover, 1.01},
		{"bufferbloat_refractory_period_ms", a.CutRefractory.Std(), 300 * ms},
		{"decay_refractory_period_ms", a.DecayRefractory.Std(), 1000 * ms},
		{"randomize_reflectors", in.RandomizeReflectors, true},
		{"retain_reflector_stats", in.RetainReflectorStats, true},
		{"no_pingers", a.ActiveReflectors, 6},
		{"reflector_ping_interval_s", a.ProbeInterval.Std(), 300 * ms},
		{"reflectors (count)", len(a.Reflectors), 30},
		{"reflector_health_check_interval_s", in.HealthCheckInterval, time.Second},
		{"reflector_response_deadline_s", a.ResponseDeadline.Std(), time.Second},
		{"reflector_misbehaving_detection_window", in.MisbehavingWindow, 60},
		{"reflector_misbehaving_detection_thr", in.MisbehavingThreshold, 3},
		{"reflector_replacement_interval_mins", in.ReplacementInterval, 60 * time.Minute},
		{"reflector_comparison_interval_mins", in.ComparisonInterval, time.Minute},
		{"reflector_sum_owd_baselines_delta_thr_ms", in.BaselineSumDeltaMax, 20 * ms},
		{"reflector_owd_delta_ewma_delta_thr_ms", in.DeltaEWMADeltaMax, 10 * ms},
		{"alpha_baseline_increase", in.AlphaBaselineIncrease, 0.001},
		{"alpha_baseline_decrease", in.AlphaBaselineDecrease, 0.9},
		{"alpha_delta_ewma", in.AlphaDeltaEWMA, 0.095},
		{"stale response", in.StaleResponse, 500 * ms},
		{"enable_sleep_function", a.Sleep, true},
		{"sustained_idle_sleep_thr_s", a.SleepAfter.Std(), 60 * time.Second},
		{"min_shaper_rates_enforcement", a.MinRatesOnSleep, false},
		{"stall_detection_thr", in.StallSpacings, 5},
		{"connection_stall_thr_kbps", in.StallRate, 10 * units.Kbit},
		{"global_ping_response_timeout_s", in.GlobalPingTimeout, 10 * time.Second},
		{"monitor_achieved_rates_interval_ms", in.MonitorInterval, 200 * ms},
		{"balanced engage_after", up.Balanced.EngageAfter.Std(), 4 * time.Second},
		{"balanced release_after", up.Balanced.ReleaseAfter.Std(), 20 * time.Second},
		{"mode", up.Shaper.Mode, ModeAutorate},
		{"queue", up.Shaper.Queue, units.SizeOrAuto{Auto: true}},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	seen := map[string]bool{}
	for _, r := range a.Reflectors {
		if seen[r.String()] || !r.Addr.Is4() || r.Kind != shape.ProbeICMP || r.Auto {
			t.Errorf("default reflector %s duplicated or not IPv4", r)
		}
		seen[r.String()] = true
	}
}

func TestRates(t *testing.T) {
	type want struct{ lo, base, hi units.Rate }
	for _, tc := range []struct {
		name     string
		text     string
		dir      shape.Direction
		capacity units.Rate
		peak     units.Rate
		limit    units.Rate
		want     want
		err      error
	}{
		{name: "upstream defaults, download", dir: shape.Download, want: want{5 * units.Mbit, 20 * units.Mbit, 80 * units.Mbit}},
		{name: "upstream defaults, upload", dir: shape.Upload, want: want{5 * units.Mbit, 20 * units.Mbit, 35 * units.Mbit}},
		{name: "base alone keeps the proportions", text: "[shaper]\ndownload = \"250mbit\"\nupload = \"20mbit\"\n", dir: shape.Download, want: want{62500 * units.Kbit, 250 * units.Mbit, units.Gbit}},
		{name: "derived max capped at the ceiling", text: "[shaper]\ndownload = \"300gbit\"\n", dir: shape.Download, want: want{75 * units.Gbit, 300 * units.Gbit, units.MaxRate}},
		{name: "derived max capped at the backend's limit", text: "[shaper]\ndownload = \"1gbit\"\n", dir: shape.Download, limit: 2_147_483 * units.Kbit, want: want{250 * units.Mbit, units.Gbit, 2_147_483 * units.Kbit}},
		{name: "measured rates capped at the backend's limit", text: "[shaper]\ndownload = \"auto\"\n[autorate]\ndownload = { max = \"auto\" }\n", dir: shape.Download, capacity: 17600 * units.Mbit, limit: 2_147_483 * units.Kbit, want: want{536_870_750, 2_147_483 * units.Kbit, 2_147_483 * units.Kbit}},
		{name: "measured rates within tc's limit", text: "[shaper]\ndownload = \"auto\"\n[autorate]\ndownload = { max = \"auto\" }\n", dir: shape.Download, capacity: 17600 * units.Mbit, limit: units.MaxRate, want: want{4180 * units.Mbit, 16720 * units.Mbit, 17600 * units.Mbit}},
		{name: "explicit bounds", text: "[shaper]\nupload = \"15mbit\"\n[autorate]\nupload = { min = \"3mbit\", max = \"40mbit\" }\n", dir: shape.Upload, want: want{3 * units.Mbit, 15 * units.Mbit, 40 * units.Mbit}},
		{name: "auto base needs a measurement", text: "[shaper]\ndownload = \"auto\"\n", dir: shape.Download, err: ErrNeedsMeasurement},
		{name: "auto base from capacity", text: "[shaper]\ndownload = \"auto\"\n", dir: shape.Download, capacity: 100 * units.Mbit, want: want{23750 * units.Kbit, 95 * units.Mbit, 380 * units.Mbit}},
		{name: "auto max is the capacity", text: "[shaper]\ndownload = \"auto\"\n[autorate]\ndownload = { min = \"10mbit\", max = \"auto\" }\n", dir: shape.Download, capacity: 200 * units.Mbit, want: want{10 * units.Mbit, 190 * units.Mbit, 200 * units.Mbit}},
		{name: "auto max is the highest measured, base the latest", text: "[shaper]\ndownload = \"auto\"\n[autorate]\ndownload = { min = \"10mbit\", max = \"auto\" }\n", dir: shape.Download, capacity: 100 * units.Mbit, peak: 200 * units.Mbit, want: want{10 * units.Mbit, 95 * units.Mbit, 200 * units.Mbit}},
		{name: "a peak below the latest counts as the latest", text: "[autorate]\nupload = { max = \"auto\" }\n", dir: shape.Upload, capacity: 30 * units.Mbit, peak: 10 * units.Mbit, want: want{5 * units.Mbit, 20 * units.Mbit, 30 * units.Mbit}},
		{name: "auto max without capacity keeps the proportion", text: "[shaper]\ndownload = \"40mbit\"\n[autorate]\ndownload = { max = \"auto\" }\n", dir: shape.Download, want: want{10 * units.Mbit, 40 * units.Mbit, 160 * units.Mbit}},
		{name: "measured base clamped into explicit bounds", text: "[shaper]\ndownload = \"auto\"\n[autorate]\ndownload = { min = \"10mbit\", max = \"50mbit\" }\n", dir: shape.Download, capacity: 400 * units.Mbit, want: want{10 * units.Mbit, 50 * units.Mbit, 50 * units.Mbit}},
		{name: "measured max below explicit min", text: "[shaper]\ndownload = \"auto\"\n[autorate]\ndownload = { min = \"10mbit\", max = \"auto\" }\n", dir: shape.Download, capacity: 5 * units.Mbit, want: want{10 * units.Mbit, 10 * units.Mbit, 10 * units.Mbit}},
		{name: "fixed pins all three", text: "[shaper]\nmode = \"fixed\"\ndownload = \"450mbit\"\nupload = \"22mbit\"\n", dir: shape.Upload, want: want{22 * units.Mbit, 22 * units.Mbit, 22 * units.Mbit}},
		{name: "a fixed direction pins its own", text: "[shaper]\ndownload_mode = \"fixed\"\ndownload = \"150mbit\"\nupload = \"12mbit\"\n", dir: shape.Download, want: want{150 * units.Mbit, 150 * units.Mbit, 150 * units.Mbit}},
		{name: "and leaves the other steered", text: "[shaper]\ndownload_mode = \"fixed\"\ndownload = \"150mbit\"\nupload = \"12mbit\"\n", dir: shape.Upload, want: want{3 * units.Mbit, 12 * units.Mbit, 21 * units.Mbit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _, err := Parse("r.toml", []byte(minimal+tc.text), LoadOptions{Target: TargetLinux})
			if err != nil {
				t.Fatal(err)
			}
			lo, base, hi, err := l.Rates(tc.dir, tc.capacity, tc.peak, tc.limit)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if got := (want{lo, base, hi}); tc.err == nil && got != tc.want {
				t.Errorf("min/base/max = %v/%v/%v, want %v/%v/%v", lo, base, hi, tc.want.lo, tc.want.base, tc.want.hi)
			}
		})
	}
}

// TestLawTunables: the five keys macake's law tunes have macake's values
// in Defaults and cake-autorate's under controller = "upstream"; a value
// the file sets wins under either law.
func TestLawTunables(t *testing.T) {
	mac := Defaults.Autorate
	if mac.MaxIncrease != 1.08 || mac.MaxCut != 0.6 || mac.HighLoad != 0.6 || mac.FullCutAbove.Std() != 45*time.Millisecond || mac.CutRefractory.Std() != 200*time.Millisecond {
		t.Errorf("macake's law: max_increase %v, max_cut %v, high_load %v, full_cut_above %v, cut_refractory %v", mac.MaxIncrease, mac.MaxCut, mac.HighLoad, mac.FullCutAbove, mac.CutRefractory)
	}
	parse := func(text string) Autorate {
		t.Helper()
		l, probs, _ := parseTest(t, "links.d/test.toml", "[match]\ninterface = \"en0\"\n[autorate]\n"+text, TargetLinux)
		if len(probs) > 0 {
			t.Fatalf("%q: %v", text, probs)
		}
		return l.Autorate
	}
	up := parse("controller = \"upstream\"\n")
	if up.MaxIncrease != 1.04 || up.MaxCut != 0.75 || up.HighLoad != 0.75 || up.FullCutAbove.Std() != 60*time.Millisecond || up.CutRefractory.Std() != 300*time.Millisecond {
		t.Errorf("upstream's law: %+v", up)
	}
	if got := parse("controller = \"upstream\"\nmax_increase = 1.1\n"); got.MaxIncrease != 1.1 || got.MaxCut != 0.75 {
		t.Errorf("upstream's law with max_increase set: max_increase %v, max_cut %v", got.MaxIncrease, got.MaxCut)
	}
	if got := parse("high_load = 0.8\n"); got.HighLoad != 0.8 || got.MaxIncrease != 1.08 {
		t.Errorf("macake's law with high_load set: high_load %v, max_increase %v", got.HighLoad, got.MaxIncrease)
	}
	if len(UpstreamTunables()) != 5 {
		t.Errorf("%d law-dependent keys, want the five above", len(UpstreamTunables()))
	}
}
