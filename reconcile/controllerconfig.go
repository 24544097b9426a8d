// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"errors"
	"fmt"

	"github.com/macake/macake/config"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// maxControllerMTU is the largest MTU controller.Config accepts.
const maxControllerMTU = 65535

// controllerModes maps a policy's shaper.mode onto the controller's.
var controllerModes = map[config.Mode]controller.Mode{
	config.ModeAutorate: controller.ModeAutorate,
	config.ModeBalanced: controller.ModeBalanced,
	config.ModeFixed:    controller.ModeFixed,
	config.ModeOff:      controller.ModeOff,
}

// ControllerConfig maps a validated policy onto its controller's
// configuration, on the network whose state-file profile is p (its
// measured capacity resolves "auto" rates; its last known-good rates are
// where an autorate or balanced controller starts) and an interface with
// the given MTU (≤ 0: controller.DefaultMTU). Every [autorate] key and
// every internal cake-autorate constant of config.Defaults has its
// controller field. autorate.controller picks the law: macake's
// (controller.MacakeImprovements, the default) or upstream's exactly.
//
// The activity threshold is lowered to the smaller minimum rate when a
// policy's minimum is below it (the controller refuses such a
// configuration; validation warns about it). Mode "off" observes at its
// configured rate, or at the default rate when that is an unmeasured
// "auto". The result passes controller.Config.Validate, or the error says
// why not.
func ControllerConfig(l config.Link, p state.Profile, mtu int) (controller.Config, error) {
	if mtu <= 0 {
		mtu = controller.DefaultMTU
	}
	// Linux's loopback has a 64 KiB MTU, one more than the controller
	// takes; the serialisation delay of such a packet is negligible anyway.
	mtu = min(mtu, maxControllerMTU)
	mode, ok := controllerModes[l.Shaper.Mode]
	if !ok {
		return controller.Config{}, fmt.Errorf("link %q: unknown mode %q", l.Name, l.Shaper.Mode)
	}
	a, in := l.Autorate, l.Autorate.Internal
	// Constants a policy cannot set (e.g. AchievedCut) keep the
	// controller's defaults; everything else comes from the policy.
	c := controller.DefaultConfig()
	c = controller.Config{
		AchievedCut:           c.AchievedCut,
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
		Reflectors:            append(a.Reflectors[:0:0], a.Reflectors...),
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
		MTU:                   mtu,
		Overhead:              l.Shaper.Overhead,
		MPU:                   l.Shaper.MPU,
		EngageAfter:           l.Balanced.EngageAfter.Std(),
		ReleaseAfter:          l.Balanced.ReleaseAfter.Std(),
	}
	if l.Autorate.Controller != config.LawUpstream {
		c.Improvements = controller.MacakeImprovements()
	}
	adaptive := l.Shaper.Mode == config.ModeAutorate || l.Shaper.Mode == config.ModeBalanced
	for _, d := range shape.Directions {
		capacity, peak, good := profileCapacity(p, d)
		dc := &c.Download
		if d == shape.Upload {
			dc = &c.Upload
		}
		lo, base, hi, err := l.Rates(d, config.Rate(capacity), config.Rate(peak))
		if errors.Is(err, config.ErrNeedsMeasurement) && l.Shaper.Mode == config.ModeOff {
			// Nothing is shaped, so the rate only scales the load classes.
			lo, base, hi, err = config.Link{Policy: config.Defaults}.Rates(d, 0, 0)
		}
		if err != nil {
			return controller.Config{}, fmt.Errorf("link %q: shaper.%s: %w", l.Name, d, err)
		}
		dc.Min, dc.Base, dc.Max = int64(lo), int64(base), int64(hi)
		if adaptive && good > 0 {
			dc.Start = max(dc.Min, min(dc.Max, good))
		}
		dc.DelayThreshold = a.DelayThreshold.Std()
		dc.FullIncreaseThreshold = a.FullIncreaseBelow.Std()
		dc.FullCutThreshold = a.FullCutAbove.Std()
	}
	c.ConnectionActive = min(c.ConnectionActive, c.Download.Min, c.Upload.Min)
	if err := c.Validate(); err != nil {
		return controller.Config{}, fmt.Errorf("link %q: %w", l.Name, err)
	}
	return c, nil
}
