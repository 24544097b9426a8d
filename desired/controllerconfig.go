// SPDX-License-Identifier: Apache-2.0

package desired

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

// ControllerConfig maps a validated policy onto its controller's
// configuration, on the network whose state-file profile is p (its
// measured capacity resolves "auto" rates; its last known-good rates are
// where an autorate or balanced controller starts) and an interface with
// the given MTU (≤ 0: controller.DefaultMTU). The tunables, and the law
// autorate.controller picks, are controller.FromPolicy's, the same mapping
// that makes controller.DefaultConfig out of config.Defaults; this adds
// what depends on the network: the rates and the MTU.
//
// The activity threshold is lowered to the smaller minimum rate when a
// policy's minimum is below it (the controller refuses such a
// configuration; validation warns about it). Mode "off" observes at its
// configured rate, or at the default rate when that is an unmeasured
// "auto". The result passes controller.Config.Validate, or the error says
// why not.
func ControllerConfig(l config.Link, p state.Profile, mtu int, lim shape.Limits) (controller.Config, error) {
	if mtu <= 0 {
		mtu = controller.DefaultMTU
	}
	// Linux's loopback has a 64 KiB MTU, one more than the controller
	// takes; the serialisation delay of such a packet is negligible anyway.
	mtu = min(mtu, maxControllerMTU)
	c, err := controller.FromPolicy(l.Policy)
	if err != nil {
		return controller.Config{}, fmt.Errorf("link %q: %w", l.Name, err)
	}
	c.MTU = mtu
	adaptive := l.Shaper.Mode == config.ModeAutorate || l.Shaper.Mode == config.ModeBalanced
	for _, d := range shape.Directions {
		capacity, peak, good := profileCapacity(p, d)
		dc := &c.Download
		if d == shape.Upload {
			dc = &c.Upload
		}
		lo, base, hi, err := l.Rates(d, config.Rate(capacity), config.Rate(peak), config.Rate(lim.Rate()))
		if errors.Is(err, config.ErrNeedsMeasurement) && l.Shaper.Mode == config.ModeOff {
			// Nothing is shaped, so the rate only scales the load classes.
			lo, base, hi, err = config.Link{Policy: config.Defaults}.Rates(d, 0, 0, 0)
		}
		if err != nil {
			return controller.Config{}, fmt.Errorf("link %q: shaper.%s: %w", l.Name, d, err)
		}
		dc.Min, dc.Base, dc.Max = int64(lo), int64(base), int64(hi)
		if adaptive && good > 0 {
			dc.Start = max(dc.Min, min(dc.Max, good))
		}
	}
	c.ConnectionActive = min(c.ConnectionActive, c.Download.Min, c.Upload.Min)
	if err := c.Validate(); err != nil {
		return controller.Config{}, fmt.Errorf("link %q: %w", l.Name, err)
	}
	return c, nil
}
