// SPDX-License-Identifier: Apache-2.0

package simrun

import (
	"fmt"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/config"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/state"
)

// PolicyLimits says which parts of a policy the simulator cannot honour,
// for the reader of a --policy run's table.
const PolicyLimits = `policy: every [shaper], [autorate] and [balanced] key applies to the "policy" arm as in
macake watch; [match] and [cake] do not (no network to match, no CAKE in a dummynet pipe), the
reflector addresses only name the simulator's modelled reflectors, and shaper.overhead/mpu lower
the pipe rate as the daemon does while the simulated link itself carries no framing overhead.`

// applyPolicy loads --policy, builds the controller configuration the
// daemon would run (desired.ControllerConfig, on a network measured at the
// link's mean capacity, MTU 1500) and puts the policy's rate bounds (and a
// fixed queue size) into opt for the other autorate arms.
func (s *Spec) applyPolicy(opt *sim.Options, link *sim.Link) (*config.Link, tuning.Config, error) {
	// The simulator's pipes are dummynet's: the policy is checked as for a Mac.
	pol, _, err := config.LoadFile(s.Policy, config.LoadOptions{Target: config.TargetDarwin, SkipOwnershipCheck: true, Limits: pfdn.Limits})
	if err != nil {
		return nil, tuning.Config{}, err
	}
	profile := state.Profile{
		Link:             pol.Name,
		DownloadCapacity: int64(link.Mean(shape.Download)),
		UploadCapacity:   int64(link.Mean(shape.Upload)),
		PeakDownload:     int64(link.Mean(shape.Download)),
		PeakUpload:       int64(link.Mean(shape.Upload)),
		IdleRTT:          link.MinRTT(),
	}
	cfg, err := desired.ControllerConfig(pol, profile, 1500, desired.BackendFacts{Limits: pfdn.Limits})
	if err != nil {
		return nil, tuning.Config{}, fmt.Errorf("%s: %w", s.Policy, err)
	}
	for _, d := range shape.Directions {
		dc := *cfg.Direction(d)
		opt.Bounds[d] = sim.Bounds{Min: dc.Min, Base: dc.Base, Max: dc.Max}
	}
	if q := pol.Shaper.Queue; !q.Auto && q.Size > 0 && s.Queue == "auto" {
		opt.Queue = sim.QueueRule{Bytes: min(int64(q.Size), sim.MaxQueueBytes)}
	}
	return &pol, cfg, nil
}
