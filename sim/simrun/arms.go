// SPDX-License-Identifier: Apache-2.0

package simrun

import (
	"errors"
	"fmt"
	"strings"

	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/autorate"
)

// policyArm is the name of the arm --policy adds.
const policyArm = "policy"

// benchControllers are the default arms of --traces: every baseline of
// benchmark.md §6.2 that the table needs, and the two autorate controllers.
const benchControllers = "none,fixed,fixed-p5,upstream,ours,oracle,oracle-lag0.3"

// autorateArms holds the controllers built on the production controller
// package, by name: upstream (the faithful port) and ours.
var autorateArms = autorate.Arms()

// DefaultControllers are the arms of a single run when --controllers is
// not given: the baselines that frame the autorate controllers (or, without
// them, the baselines alone).
func DefaultControllers() string {
	if _, ok := autorateArms["ours"]; ok {
		return "none,fixed,upstream,ours,oracle"
	}
	return "none,fixed,fixed-p5,oracle,oracle-lag0.3"
}

// AvailableControllers lists the controllers by name, in table order: the
// simulator's baselines, then the autorate controllers. Variants of the
// latter (autorate.Switches) are left out, as there are too many to list.
func AvailableControllers() []string {
	names := append([]string(nil), sim.Baselines...)
	for _, n := range []string{"upstream", "ours"} {
		if _, ok := autorateArms[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

// arms resolves a --controllers list, dropping repeats. The policy arm
// gets no factory here: --policy builds it once the link is known.
func arms(list string) ([]sim.Arm, error) {
	var arms []sim.Arm
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		ctl, q, err := sim.SplitArm(name)
		if err != nil {
			return nil, fmt.Errorf("--controllers: %w", err)
		}
		f, err := controllerFactory(ctl)
		if err != nil {
			return nil, err
		}
		arms = append(arms, sim.Arm{Name: name, Factory: f, Queue: q})
	}
	if len(arms) == 0 {
		return nil, errors.New("--controllers: name at least one controller")
	}
	return arms, nil
}

// controllerFactory maps a controller name to its factory: the baselines
// of the simulator and the autorate controllers.
func controllerFactory(name string) (sim.Factory, error) {
	if f, err := sim.Baseline(name); err == nil {
		return f, nil
	}
	if f, ok := autorateArms[name]; ok {
		return f, nil
	}
	if name == policyArm { // built by --policy
		return nil, nil
	}
	if strings.HasPrefix(name, "upstream") || strings.HasPrefix(name, "ours") {
		f, err := autorate.Variant(name)
		if err != nil {
			return nil, fmt.Errorf("--controllers: %w", err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("--controllers: unknown controller %q; available: %s", name, strings.Join(AvailableControllers(), ", "))
}

func hasArm(arms []sim.Arm, name string) bool {
	for _, a := range arms {
		if a.Name == name {
			return true
		}
	}
	return false
}

// phasesArm picks the controller of the off/on/off table: by name, or for
// "auto" the most telling one run (the policy's, then ours, then upstream,
// then an oracle).
func phasesArm(name string, arms []sim.Arm) (sim.Arm, bool) {
	switch name {
	case "none":
		return sim.Arm{}, false
	case "auto":
		for _, pref := range []string{policyArm, "ours", "upstream", "oracle-lag0.3", "oracle-lag0.5", "oracle"} {
			for _, a := range arms {
				if a.Name == pref {
					return a, true
				}
			}
		}
		return sim.Arm{}, false
	}
	for _, a := range arms {
		if a.Name == name {
			return a, true
		}
	}
	return sim.Arm{}, false
}

func armNames(arms []sim.Arm) string {
	var n []string
	for _, a := range arms {
		n = append(n, a.Name)
	}
	return strings.Join(n, ", ")
}
