// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"net/netip"

	"github.com/macake/macake/config"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// ProbeKind returns how a link's "auto:" reflectors are probed on the
// network whose profile is p: TCP when measure found that only TCP sees
// the bloat there, else ICMP.
func ProbeKind(p state.Profile) shape.ProbeKind {
	if k, ok := shape.ParseProbeKind(p.ProbeKind); ok && k == shape.ProbeTCP {
		return shape.ProbeTCP
	}
	return shape.ProbeICMP
}

// Probes returns how each of the link's reflectors is probed on the
// network whose profile is p: what the daemon's prober sends and what the
// backends exempt from shaping, from one rule.
func Probes(l config.Link, p state.Profile) []shape.Reflector {
	return l.Autorate.Probes(ProbeKind(p))
}

// probesOf returns the probes to the addresses active, as Probes says;
// an address the policy does not list is probed with ICMP.
func probesOf(all []shape.Reflector, active []netip.Addr) []shape.Reflector {
	by := make(map[netip.Addr]shape.Reflector, len(all))
	for _, r := range all {
		by[r.Addr] = r
	}
	out := make([]shape.Reflector, 0, len(active))
	for _, a := range active {
		r, ok := by[a]
		if !ok {
			r = shape.ICMPReflector(a)
		}
		out = append(out, r)
	}
	return out
}
