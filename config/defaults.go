// SPDX-License-Identifier: Apache-2.0

package config

import (
	"net/netip"
	"slices"
	"time"

	"github.com/macake/macake/config/units"
)

// Defaults is every default of a policy file, in one place, under the
// default control law (macake's). The controller values are cake-autorate's
// (reference/autorate.md §3, upstream defaults.sh at 94238be) except the
// five that macake's law tunes, whose upstream values are in
// upstreamTunables (controller = "upstream" takes them); docs/CONFIG.md
// lists both. Treat it as read-only: Parse starts each file from a copy.
//
// Bounds are the exception to "fill in the default": upstream's
// min/max (5/80 Mbit/s download, 5/35 Mbit/s upload) belong to its default
// base rate of 20 Mbit/s. A policy that sets its own base rate and no
// bounds gets bounds in the same proportion to its base (see Link.Rates),
// so "download = 250mbit" alone is a sensible policy.
var Defaults = Policy{
	Shaper: Shaper{
		Mode:     ModeAutorate,
		Download: units.RateOrAuto{Rate: 20 * units.Mbit}, // base_dl_shaper_rate_kbps 20000
		Upload:   units.RateOrAuto{Rate: 20 * units.Mbit}, // base_ul_shaper_rate_kbps 20000
		Queue:    units.SizeOrAuto{Auto: true},
	},
	Autorate: Autorate{
		Download:           Bounds{Min: 5 * units.Mbit, Max: units.RateOrAuto{Rate: 80 * units.Mbit}}, // min/max_dl_shaper_rate_kbps
		Upload:             Bounds{Min: 5 * units.Mbit, Max: units.RateOrAuto{Rate: 35 * units.Mbit}}, // min/max_ul_shaper_rate_kbps
		Reflectors:         ICMPReflectors(DefaultReflectors),
		ActiveReflectors:   6,                                      // no_pingers
		ProbeInterval:      units.Duration(300 * time.Millisecond), // reflector_ping_interval_s 0.3
		DelayThreshold:     units.Duration(30 * time.Millisecond),  // *_owd_delta_delay_thr_ms
		Controller:         LawMacake,
		FullIncreaseBelow:  units.Duration(10 * time.Millisecond),   // *_avg_owd_delta_max_adjust_up_thr_ms
		FullCutAbove:       units.Duration(45 * time.Millisecond),   // macake's; upstreamTunables
		BufferbloatWindow:  6,                                       // bufferbloat_detection_window
		BufferbloatSamples: 3,                                       // bufferbloat_detection_thr
		MaxCut:             0.6,                                     // macake's; upstreamTunables
		MaxIncrease:        1.08,                                    // macake's; upstreamTunables
		HighLoad:           0.6,                                     // macake's; upstreamTunables
		ActiveThreshold:    2000 * units.Kbit,                       // connection_active_thr_kbps
		CutRefractory:      units.Duration(200 * time.Millisecond),  // macake's; upstreamTunables
		DecayRefractory:    units.Duration(1000 * time.Millisecond), // decay_refractory_period_ms
		ResponseDeadline:   units.Duration(1 * time.Second),         // reflector_response_deadline_s
		Sleep:              true,                                    // enable_sleep_function
		SleepAfter:         units.Duration(60 * time.Second),        // sustained_idle_sleep_thr_s
		MinRatesOnSleep:    false,                                   // min_shaper_rates_enforcement
		Internal: Internal{
			MinCut:                0.99,
			MinIncrease:           1.0,
			Decay:                 0.99,
			Recover:               1.01,
			AlphaBaselineIncrease: 0.001,
			AlphaBaselineDecrease: 0.9,
			AlphaDeltaEWMA:        0.095,
			StaleResponse:         500 * time.Millisecond,
			HealthCheckInterval:   1 * time.Second,
			MisbehavingWindow:     60,
			MisbehavingThreshold:  3,
			ReplacementInterval:   60 * time.Minute,
			ComparisonInterval:    1 * time.Minute,
			BaselineSumDeltaMax:   20 * time.Millisecond,
			DeltaEWMADeltaMax:     10 * time.Millisecond,
			RandomizeReflectors:   true,
			RetainReflectorStats:  true,
			StallSpacings:         5,
			StallRate:             10 * units.Kbit,
			GlobalPingTimeout:     10 * time.Second,
			MonitorInterval:       200 * time.Millisecond,
		},
	},
	Balanced: Balanced{
		EngageAfter:  units.Duration(4 * time.Second),
		ReleaseAfter: units.Duration(20 * time.Second),
	},
	Cake: Cake{SplitGSO: true, LinkLayer: LinkLayerNone},
}

// LawTunable is one [autorate] key whose default depends on the control
// law: Defaults holds macake's value, Upstream sets cake-autorate's.
type LawTunable struct {
	// Key is the key's path, e.g. "autorate.max_increase".
	Key string
	// Upstream sets cake-autorate's default (defaults.sh) in a.
	Upstream func(a *Autorate)
}

// upstreamTunables are the keys macake's law tunes away from
// cake-autorate's defaults, with upstream's values: the settings that won
// in the simulator's leave-one-source-out tuning on 36 traces of six
// sources (docs/MEASUREMENTS.md, "How ours was built"). Under macake's law
// a steadier link is probed faster (max_increase), a cut answers a smaller
// queue harder (full_cut_above, max_cut), a direction counts as loaded
// sooner (high_load), and cuts and increases follow one another sooner
// (cut_refractory).
var upstreamTunables = []LawTunable{
	{"autorate.max_increase", func(a *Autorate) { a.MaxIncrease = 1.04 }},                                       // shaper_rate_max_adjust_up_load_high
	{"autorate.max_cut", func(a *Autorate) { a.MaxCut = 0.75 }},                                                 // shaper_rate_max_adjust_down_bufferbloat
	{"autorate.high_load", func(a *Autorate) { a.HighLoad = 0.75 }},                                             // high_load_thr
	{"autorate.full_cut_above", func(a *Autorate) { a.FullCutAbove = units.Duration(60 * time.Millisecond) }},   // *_avg_owd_delta_max_adjust_down_thr_ms
	{"autorate.cut_refractory", func(a *Autorate) { a.CutRefractory = units.Duration(300 * time.Millisecond) }}, // bufferbloat_refractory_period_ms
}

// UpstreamTunables lists the keys whose default depends on the law, with
// cake-autorate's values (for docs and tests).
func UpstreamTunables() []LawTunable { return slices.Clone(upstreamTunables) }

// DefaultsFor returns the policy defaults under law: Defaults, with
// cake-autorate's values for the keys macake's law tunes when law is
// LawUpstream. Treat it as read-only, as Defaults.
func DefaultsFor(law ControlLaw) Policy {
	p := Defaults
	p.Autorate.Controller = law
	applyLaw(&p, func(string) bool { return false })
	return p
}

// applyLaw gives a policy under the upstream law cake-autorate's default
// for every law-dependent key the file does not set (given).
func applyLaw(p *Policy, given func(key string) bool) {
	if p.Autorate.Controller != LawUpstream {
		return
	}
	for _, t := range upstreamTunables {
		if !given(t.Key) {
			t.Upstream(&p.Autorate)
		}
	}
}

// AutoRateFraction is the share of the measured capacity that "auto" base
// rates start at.
const AutoRateFraction = 0.95

// DefaultReflectors are 30 public anycast DNS resolvers from the same
// providers, in the same numbers, as cake-autorate's default list
// (Cloudflare 2, Google 2, Quad9 3, AdGuard 5, Neustar/UltraDNS 11,
// OpenDNS 5, CleanBrowsing 2). The addresses are macake's own choice. All
// answer ICMP echo; unhealthy ones are replaced at run time. It is the one
// default pool: policies without reflectors, tuning.DefaultConfig and
// the simulator's arms all probe it.
var DefaultReflectors = mustAddrs(
	"1.1.1.1", "1.0.0.1",
	"8.8.8.8", "8.8.4.4",
	"9.9.9.9", "9.9.9.10", "9.9.9.11",
	"94.140.14.14", "94.140.15.15", "94.140.14.15", "94.140.15.16", "94.140.14.140",
	"156.154.70.1", "156.154.71.1", "156.154.70.2", "156.154.71.2", "156.154.70.3",
	"156.154.71.3", "156.154.70.4", "156.154.71.4", "156.154.70.5", "156.154.71.5", "64.6.64.6",
	"208.67.222.222", "208.67.220.220", "208.67.222.220", "208.67.220.222", "208.67.222.123",
	"185.228.168.9", "185.228.169.9",
)

func mustAddrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// DefaultPolicy returns a copy of Defaults that shares no memory with it,
// with the bounds cleared: they derive from the base rate (see Defaults).
func DefaultPolicy() Policy {
	p := Defaults
	p.Autorate.Reflectors = slices.Clone(Defaults.Autorate.Reflectors)
	p.Autorate.Download = Bounds{}
	p.Autorate.Upload = Bounds{}
	return p
}
