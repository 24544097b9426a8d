// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"fmt"

	"github.com/macake/macake/config"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// maxControllerMTU is the largest MTU tuning.Config accepts.
const maxControllerMTU = 65535

// ControllerConfig maps a validated policy onto its controller's
// configuration, on the network whose state-file profile is p (its
// measured capacity resolves "auto" rates; its last known-good rates are
// where an autorate or balanced controller starts: LinkBounds) and an
// interface with the given MTU (≤ 0: tuning.DefaultMTU), for the
// backend be describes. The tunables, and the law autorate.controller
// picks, are tuning.FromPolicy's, the same mapping that makes
// tuning.DefaultConfig out of config.Defaults; this adds what depends
// on the network and the backend: the rates, the MTU, and whether the
// controller compensates the per-packet overhead (not when the backend's
// shaper adds it itself, be.KernelOverhead, which would count it twice).
//
// The activity threshold is lowered to the smaller minimum rate when a
// policy's minimum is below it (the controller refuses such a
// configuration; validation warns about it). The result passes
// tuning.Config.Validate, or the error says why not.
func ControllerConfig(l config.Link, p state.Profile, mtu int, be BackendFacts) (tuning.Config, error) {
	if mtu <= 0 {
		mtu = tuning.DefaultMTU
	}
	// Linux's loopback has a 64 KiB MTU, one more than the controller
	// takes; the serialisation delay of such a packet is negligible anyway.
	mtu = min(mtu, maxControllerMTU)
	c, err := tuning.FromPolicy(l.Policy)
	if err != nil {
		return tuning.Config{}, fmt.Errorf("link %q: %w", l.Name, err)
	}
	c.MTU = mtu
	if be.KernelOverhead {
		c.Overhead, c.MPU = 0, 0
	}
	for _, d := range shape.Directions {
		b, err := LinkBounds(l, d, p, be.Limits)
		if err != nil {
			return tuning.Config{}, fmt.Errorf("link %q: shaper.%s: %w", l.Name, d, err)
		}
		dc := c.Direction(d)
		dc.Min, dc.Base, dc.Max = b.Min, b.Base, b.Max
		if b.Source == FromKnownGood {
			dc.Start = b.Start
		}
	}
	c.ConnectionActive = min(c.ConnectionActive, c.Download.Min, c.Upload.Min)
	if err := c.Validate(); err != nil {
		return tuning.Config{}, fmt.Errorf("link %q: %w", l.Name, err)
	}
	return c, nil
}
