// SPDX-License-Identifier: Apache-2.0

package tuning

import (
	"fmt"

	"github.com/macake/macake/config"
	"github.com/macake/macake/shape"
)

// defaultAchievedCut is Config.AchievedCut's value. It is the one
// controller constant with no home in config.Defaults: it belongs to
// macake's CutToAchieved, which no policy key tunes.
// 0.8, chosen with macake's tuned defaults (docs/MEASUREMENTS.md): a cut
// that leaves a fifth of the link's capacity to drain the queue behind it.
const defaultAchievedCut = 0.8

// defaultJitterScale and defaultJitterFloor are Config.JitterScale and
// JitterFloor (Improvements.JitterThreshold), which no policy key tunes.
const (
	defaultJitterScale = 3
	defaultJitterFloor = 0.2
)

// policyModes maps a policy's shaper.mode onto the controller's.
var policyModes = map[config.Mode]Mode{
	config.ModeAutorate: ModeAutorate,
	config.ModeBalanced: ModeBalanced,
	config.ModeFixed:    ModeFixed,
	config.ModeOff:      ModeOff,
}

// FromPolicy maps a policy's tunables onto a controller configuration: the
// mode (as the directions' modes make it: config.Shaper.Effective) and
// which directions it steers, every [autorate] key except the rate bounds, every constant of
// config.Internal, the [shaper] framing (overhead, mpu) and the [balanced]
// timers. It is the only place where a policy value becomes a controller
// field, so DefaultConfig (config.Defaults) and a daemon's link
// (desired.ControllerConfig) cannot drift apart. autorate.controller
// picks the law: macake's (MacakeImprovements) or upstream's exactly.
//
// The rates are left to the caller, because "auto" rates and the
// known-good start rate come from measurements (config.Link.Rates and the
// state file), and so is the MTU of the interface (DefaultMTU here).
func FromPolicy(p config.Policy) (Config, error) {
	mode, ok := policyModes[p.Shaper.Effective()]
	if !ok {
		return Config{}, fmt.Errorf("unknown mode %q", p.Shaper.Mode)
	}
	a, in := p.Autorate, p.Autorate.Internal
	c := Config{
		Mode:                  mode,
		BufferbloatWindow:     a.BufferbloatWindow,
		BufferbloatVotes:      a.BufferbloatSamples,
		HighLoad:              a.HighLoad,
		ConnectionActive:      int64(a.ActiveThreshold),
		ConnectionStall:       int64(in.StallRate),
		MildestCut:            in.MinCut,
		StrongestCut:          a.MaxCut,
		SmallestIncrease:      in.MinIncrease,
		LargestIncrease:       a.MaxIncrease,
		DecayFactor:           in.Decay,
		RecoveryFactor:        in.Recover,
		BufferbloatRefractory: a.CutRefractory.Std(),
		DecayRefractory:       a.DecayRefractory.Std(),
		Reflectors:            a.Addrs(),
		Pingers:               min(max(a.ActiveReflectors, 1), len(a.Reflectors)),
		PingInterval:          a.ProbeInterval.Std(),
		RandomizeReflectors:   in.RandomizeReflectors,
		RetainReflectorStats:  in.RetainReflectorStats,
		HealthCheckInterval:   in.HealthCheckInterval,
		ResponseDeadline:      a.ResponseDeadline.Std(),
		MisbehavingWindow:     in.MisbehavingWindow,
		MisbehavingOffences:   in.MisbehavingThreshold,
		ReplacementInterval:   in.ReplacementInterval,
		ComparisonInterval:    in.ComparisonInterval,
		BaselineSumExcess:     in.BaselineSumDeltaMax,
		DeltaEWMAExcess:       in.DeltaEWMADeltaMax,
		AlphaBaselineIncrease: in.AlphaBaselineIncrease,
		AlphaBaselineDecrease: in.AlphaBaselineDecrease,
		AlphaDeltaEWMA:        in.AlphaDeltaEWMA,
		SleepEnabled:          a.Sleep,
		SleepAfter:            a.SleepAfter.Std(),
		MinRatesOnSleep:       a.MinRatesOnSleep,
		StallDetection:        in.StallSpacings,
		GlobalPingTimeout:     in.GlobalPingTimeout,
		StaleResponseAge:      in.StaleResponse,
		MonitorInterval:       in.MonitorInterval,
		MTU:                   DefaultMTU,
		Overhead:              p.Shaper.Overhead.Bytes,
		MPU:                   p.Shaper.MPU,
		EngageAfter:           p.Balanced.EngageAfter.Std(),
		ReleaseAfter:          p.Balanced.ReleaseAfter.Std(),
		AchievedCut:           defaultAchievedCut,
		JitterScale:           defaultJitterScale,
		JitterFloor:           defaultJitterFloor,
	}
	if a.Controller != config.LawUpstream {
		c.Improvements = MacakeImprovements()
	}
	for _, d := range shape.Directions {
		dc := c.Direction(d)
		dc.DelayThreshold = a.DelayThreshold.Std()
		dc.FullIncreaseThreshold = a.FullIncreaseBelow.Std()
		dc.FullCutThreshold = a.FullCutAbove.Std()
		// A direction of its own mode fixed or off is watched, never
		// steered (download_mode, upload_mode).
		dc.MonitorOnly = !p.Shaper.Steers(d)
	}
	return c, nil
}

// Direction returns the per-direction tunables of d, for changing them.
func (c *Config) Direction(d shape.Direction) *DirectionConfig {
	if d == shape.Upload {
		return &c.Upload
	}
	return &c.Download
}
