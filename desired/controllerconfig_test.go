// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

// TestControllerConfigOfADefaultPolicyIsUpstream: a policy that sets only
// its interface and asks for upstream's law runs exactly cake-autorate's
// defaults (tuning.DefaultConfig, reflectors included), on an
// interface of DefaultConfig's MTU; without the key it runs macake's law.
func TestControllerConfigOfADefaultPolicyIsUpstream(t *testing.T) {
	if c, err := ControllerConfig(configtest.Parse(t, "wan", configtest.Policy{Interface: "en0"}.TOML()), state.Profile{}, 1500, BackendFacts{}); err != nil || c.Improvements != tuning.MacakeImprovements() {
		t.Errorf("the default law: %+v, %v; want macake's", c.Improvements, err)
	}
	l := configtest.Parse(t, "wan", configtest.Policy{Interface: "en0", More: "[autorate]\ncontroller = \"upstream\"\n"}.TOML())
	got, err := ControllerConfig(l, state.Profile{}, 1500, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	want := tuning.DefaultConfig()
	if !reflect.DeepEqual(got, want) {
		gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
		for i := range gv.NumField() {
			if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
				t.Errorf("%s: got %v, want %v", gv.Type().Field(i).Name, gv.Field(i).Interface(), wv.Field(i).Interface())
			}
		}
	}
}

// TestControllerConfigMapsEveryPolicyKey sets every [autorate], [shaper]
// and [balanced] key a controller reads to a non-default value and checks
// that each lands in its field.
func TestControllerConfigMapsEveryPolicyKey(t *testing.T) {
	l := configtest.Parse(t, "hotel", `
[match]
interface = "en1"
[shaper]
mode = "balanced"
download = "40mbit"
upload = "8mbit"
overhead = 18
mpu = 64
[autorate]
download = { min = "4mbit", max = "60mbit" }
upload = { min = "1mbit", max = "12mbit" }
reflectors = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
active_reflectors = 2
probe_interval = "200ms"
delay_threshold = "20ms"
full_increase_below = "5ms"
full_cut_above = "80ms"
bufferbloat_window = 8
bufferbloat_samples = 4
max_cut = 0.6
max_increase = 1.1
high_load = 0.8
active_threshold = "500kbit"
cut_refractory = "400ms"
decay_refractory = "2s"
response_deadline = "1500ms"
sleep = false
sleep_after = "90s"
min_rates_on_sleep = true
[balanced]
engage_after = "3s"
release_after = "30s"
`)
	got, err := ControllerConfig(l, state.Profile{GoodDownload: 55_000_000, GoodUpload: 500_000}, 1492, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	dir := func(min, base, max, start int64) tuning.DirectionConfig {
		return tuning.DirectionConfig{Min: min, Base: base, Max: max, Start: start,
			DelayThreshold: 20 * time.Millisecond, FullIncreaseThreshold: 5 * time.Millisecond, FullCutThreshold: 80 * time.Millisecond}
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Mode", got.Mode, tuning.ModeBalanced},
		// The known-good download start is used; the upload one is below
		// the minimum and clamped to it.
		{"Download", got.Download, dir(4_000_000, 40_000_000, 60_000_000, 55_000_000)},
		{"Upload", got.Upload, dir(1_000_000, 8_000_000, 12_000_000, 1_000_000)},
		{"BufferbloatWindow", got.BufferbloatWindow, 8},
		{"BufferbloatVotes", got.BufferbloatVotes, 4},
		{"StrongestCut", got.StrongestCut, 0.6},
		{"LargestIncrease", got.LargestIncrease, 1.1},
		{"HighLoad", got.HighLoad, 0.8},
		{"ConnectionActive", got.ConnectionActive, int64(500_000)},
		{"BufferbloatRefractory", got.BufferbloatRefractory, 400 * time.Millisecond},
		{"DecayRefractory", got.DecayRefractory, 2 * time.Second},
		{"Reflectors", got.Reflectors, []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")}},
		{"Pingers", got.Pingers, 2},
		{"PingInterval", got.PingInterval, 200 * time.Millisecond},
		{"ResponseDeadline", got.ResponseDeadline, 1500 * time.Millisecond},
		{"SleepEnabled", got.SleepEnabled, false},
		{"SleepAfter", got.SleepAfter, 90 * time.Second},
		{"MinRatesOnSleep", got.MinRatesOnSleep, true},
		{"MTU", got.MTU, 1492},
		{"Overhead", got.Overhead, 18},
		{"MPU", got.MPU, 64},
		{"EngageAfter", got.EngageAfter, 3 * time.Second},
		{"ReleaseAfter", got.ReleaseAfter, 30 * time.Second},
		{"Improvements", got.Improvements, tuning.MacakeImprovements()},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestControllerConfigModesAndMeasurements(t *testing.T) {
	fixed := configtest.Parse(t, "cable", configtest.Policy{Interface: "en0", Mode: "fixed", Download: "90mbit", Upload: "9mbit"}.TOML())
	c, err := ControllerConfig(fixed, state.Profile{GoodDownload: 50_000_000}, 0, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	if lo, err := ControllerConfig(fixed, state.Profile{}, 65536, BackendFacts{}); err != nil || lo.MTU != 65535 {
		t.Errorf("Linux loopback's 64 KiB MTU: %v, MTU %d", err, lo.MTU)
	}
	if c.Mode != tuning.ModeFixed || c.Download.Min != 90_000_000 || c.Download.Max != 90_000_000 || c.Download.Start != 0 || c.MTU != tuning.DefaultMTU {
		t.Errorf("fixed: observe at the fixed rate, no known-good start, default MTU: %+v", c.Download)
	}
	// The default 2 Mbit/s activity threshold is above this minimum: the
	// controller would refuse it, so it is lowered.
	slow := configtest.Parse(t, "dsl", configtest.Policy{Interface: "en0", Download: "4mbit", Upload: "1mbit"}.TOML())
	if c, err = ControllerConfig(slow, state.Profile{}, 1500, BackendFacts{}); err != nil || c.ConnectionActive != c.Upload.Min {
		t.Errorf("slow link: activity threshold %d, upload minimum %d, err %v", c.ConnectionActive, c.Upload.Min, err)
	}

	auto := "[match]\ninterface = \"en0\"\n[shaper]\nmode = \"%s\"\ndownload = \"auto\"\n"
	if _, err := ControllerConfig(configtest.Parse(t, "sat", strings.Replace(auto, "%s", "autorate", 1)), state.Profile{}, 1500, BackendFacts{}); err == nil || !strings.Contains(err.Error(), "measure") {
		t.Errorf("autorate with an unmeasured auto rate: %v, want the measurement hint", err)
	}
	c, err = ControllerConfig(configtest.Parse(t, "sat", strings.Replace(auto, "%s", "autorate", 1)), state.Profile{DownloadCapacity: 200_000_000}, 1500, BackendFacts{})
	if err != nil || c.Download.Base != 190_000_000 {
		t.Errorf("auto = 95 %% of the measured capacity: base %d, err %v", c.Download.Base, err)
	}
	// max = "auto" follows the highest capacity measured, base the latest:
	// a second, poor measurement (40 Mbit/s after 200) lowers the start
	// rate but does not cap the controller. The daemon and one-shot
	// commands alike read the profile state.RecordMeasurement leaves.
	var st state.State
	st.RecordMeasurement("sat", state.Profile{DownloadCapacity: 200_000_000, UploadCapacity: 20_000_000})
	st.RecordMeasurement("sat", state.Profile{DownloadCapacity: 40_000_000, UploadCapacity: 20_000_000})
	autoMax := strings.Replace(auto, "%s", "autorate", 1) + "[autorate]\ndownload = { min = \"5mbit\", max = \"auto\" }\n"
	c, err = ControllerConfig(configtest.Parse(t, "sat", autoMax), st.Profiles["sat"], 1500, BackendFacts{})
	if err != nil || c.Download.Base != 38_000_000 || c.Download.Max != 200_000_000 {
		t.Errorf("max = \"auto\" after 200 then 40 Mbit/s: base %d max %d, err %v; want base 38 Mbit/s (95 %% of the latest), max 200 Mbit/s (the highest)", c.Download.Base, c.Download.Max, err)
	}
	d, err := Desired([]config.Link{configtest.Parse(t, "sat", autoMax)}, linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true}}}, Inputs{State: &st}, BackendFacts{})
	if err != nil || len(d.Active) != 1 || d.Active[0].Download.Max != 200_000_000 || d.Active[0].Download.Base != 38_000_000 {
		t.Errorf("Desired with max = \"auto\": %+v, err %v", d.Active, err)
	}
	if c, err = ControllerConfig(configtest.Parse(t, "sat", strings.Replace(auto, "%s", "off", 1)), state.Profile{}, 1500, BackendFacts{}); err != nil || c.Mode != tuning.ModeOff {
		t.Errorf("off with an unmeasured auto rate observes anyway: %v", err)
	}
}

// TestControllerConfigFollowsDirectionModes: a fixed direction is
// watched at its rate, an off one at its rate (or the default for an
// unmeasured "auto"), the other steered within its bounds, and the
// controller runs as autorate when any direction is steered.
func TestControllerConfigFollowsDirectionModes(t *testing.T) {
	starlink := configtest.Parse(t, "starlink", "[match]\ninterface = \"en0\"\n[shaper]\ndownload_mode = \"fixed\"\ndownload = \"150mbit\"\nupload = \"12mbit\"\n[autorate]\nupload = { min = \"4mbit\", max = \"30mbit\" }\n")
	c, err := ControllerConfig(starlink, state.Profile{}, 1500, BackendFacts{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != tuning.ModeAutorate || !c.Download.MonitorOnly || c.Upload.MonitorOnly ||
		c.Download.Min != 150e6 || c.Download.Max != 150e6 || c.Upload.Min != 4e6 || c.Upload.Base != 12e6 || c.Upload.Max != 30e6 {
		t.Errorf("the Starlink recipe: mode %v, download %+v, upload %+v", c.Mode, c.Download, c.Upload)
	}
	uploadOnly := configtest.Parse(t, "up", "[match]\ninterface = \"en0\"\n[shaper]\ndownload_mode = \"off\"\ndownload = \"auto\"\nupload = \"12mbit\"\n")
	c, err = ControllerConfig(uploadOnly, state.Profile{}, 1500, BackendFacts{})
	if err != nil {
		t.Fatalf("an off direction with an unmeasured auto rate: %v", err)
	}
	if c.Mode != tuning.ModeAutorate || !c.Download.MonitorOnly || c.Download.Base != 20e6 || c.Upload.MonitorOnly {
		t.Errorf("upload only: mode %v, download %+v, upload %+v", c.Mode, c.Download, c.Upload)
	}
	fixed := configtest.Parse(t, "fx", "[match]\ninterface = \"en0\"\n[shaper]\nmode = \"fixed\"\ndownload = \"50mbit\"\nupload = \"10mbit\"\nupload_mode = \"off\"\n")
	if c, err := ControllerConfig(fixed, state.Profile{}, 1500, BackendFacts{}); err != nil || c.Mode != tuning.ModeFixed {
		t.Errorf("fixed with upload off: %v %v", c.Mode, err)
	}
}
