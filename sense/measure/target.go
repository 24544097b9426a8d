// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// Target is what a measurement measures: the link (policy) if one applies,
// its interface and gateway, and the reflectors.
type Target struct {
	// Link is the policy name, or "" when no policy applies.
	Link string
	// Interface carries the traffic (the link's, else the default route's).
	Interface string
	// Facts are the interface's facts (gateway IP and MAC, when known).
	Facts linkfacts.InterfaceFacts
	// Reflectors are the policy's reflectors (or --reflector's), each
	// with its kind; ProbeInterval the per-reflector interval.
	Reflectors    []config.Reflector
	ProbeInterval time.Duration
	// Note explains a fallback (printed on stderr).
	Note string
	// Bound: Interface does not carry the default route, so the probes
	// and the load are bound to it (else they would cross the primary
	// interface and measure another path under this link's name).
	Bound bool
}

// TargetOf is what a measurement of the policy l probes: its active
// reflectors at its probe interval; for a nil l, what a policy with the
// default [autorate] would (config.Defaults). reflectors, when given
// (--reflector), replace them. The interface, its facts and how it is
// reached are the caller's to set (desired.LinkToMeasure chooses them).
func TargetOf(l *config.Link, reflectors []config.Reflector) Target {
	a := config.Defaults.Autorate
	var t Target
	if l != nil {
		a, t.Link = l.Autorate, l.Name
	}
	t.Reflectors = a.Reflectors[:min(max(a.ActiveReflectors, 1), len(a.Reflectors))]
	t.ProbeInterval = probe.DefaultInterval
	if d := a.ProbeInterval.Std(); d > 0 {
		t.ProbeInterval = d
	}
	if len(reflectors) > 0 {
		t.Reflectors = reflectors
	}
	return t
}

// BoundInterface is the interface the measurement's sockets are bound
// to: Interface when Bound, else "" (they follow the routing table).
func (t Target) BoundInterface() string {
	if t.Bound {
		return t.Interface
	}
	return ""
}

// Probes returns how the reflectors are probed first: auto reflectors
// with ICMP, the others as they say. Monitor probes these; measure
// compares them with Alternatives.
func (t Target) Probes() []shape.Reflector {
	out := make([]shape.Reflector, len(t.Reflectors))
	for i, r := range t.Reflectors {
		out[i] = r.Resolve(shape.ProbeICMP)
	}
	return out
}

// Alternatives returns the TCP probes of the auto reflectors, which
// measure runs beside Probes to see which kind sees the bloat.
func (t Target) Alternatives() []shape.Reflector {
	var out []shape.Reflector
	for _, r := range t.Reflectors {
		if r.Auto {
			out = append(out, r.Resolve(shape.ProbeTCP))
		}
	}
	return out
}

// ProfileKey is the state key of the measured profile: the link name (or
// the interface when no policy applies) plus the gateway MAC.
func (t Target) ProfileKey() string {
	name := t.Link
	if name == "" {
		name = t.Interface
	}
	return state.ProfileKey(name, t.Facts.GatewayMAC.String())
}
