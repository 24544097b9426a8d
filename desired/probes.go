// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"math/rand/v2"
	"net/netip"
	"slices"

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

// ReflectorPool orders a controller's reflector pool. Its first pingers, the
// set the controller probes first, are the ones the controller it
// replaces probed (keep, as far as the pool still has them) topped up
// with the policy's first ones: the set `plan` shows exempt and `doctor`
// probes, so that neither a start nor an edit contradicts them with a
// new draw. With rng (randomize_reflectors) the spares after them come in
// random order, which spreads replacements over the pool; the controller
// itself then shuffles nothing.
func ReflectorPool(pool []netip.Addr, pingers int, keep []netip.Addr, rng *rand.Rand) []netip.Addr {
	pingers = min(pingers, len(pool))
	out := make([]netip.Addr, 0, len(pool))
	for _, a := range keep {
		a = a.Unmap()
		if len(out) < pingers && slices.ContainsFunc(pool, func(p netip.Addr) bool { return p.Unmap() == a }) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, a := range pool {
		if a = a.Unmap(); len(out) < pingers && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	active := len(out)
	for _, a := range pool {
		if a = a.Unmap(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if rng != nil {
		spares := out[active:]
		rng.Shuffle(len(spares), func(i, j int) { spares[i], spares[j] = spares[j], spares[i] })
	}
	return out
}
