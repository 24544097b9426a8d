// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/sense/probe"
)

// ErrNoDefaultRoute is MeasureTarget's error when nothing carries the
// default route; each command adds the hint that fits it.
var ErrNoDefaultRoute = errors.New("no default route: not connected to a network?")

// MeasureTarget finds what `macake measure`, `bench` and `monitor` measure on the network facts describes,
// given the valid policies links. With named (one of links) the target is
// that policy, which must match the current network on its interface, so
// that the profile lands under the key macake watch looks up; when that
// interface does not carry the default route the target is Bound to it
// (the load and the probes leave through it, not the primary interface).
// Without named, the policy matching the current network on the
// default-route interface is used when there is one. Explicit
// reflectors replace the configured ones. Without a default route the
// error wraps ErrNoDefaultRoute, and the target still carries the
// reflectors and the default probe interval, for a monitor that probes
// them anyway.
func MeasureTarget(facts linkfacts.Facts, links []config.Link, named *config.Link, reflectors []config.Reflector) (measure.Target, error) {
	t := measure.Target{ProbeInterval: probe.DefaultInterval}
	def, haveDefault := linkfacts.DefaultInterface(facts)
	var link *config.Link
	if named != nil {
		note, bound, err := namedLinkHere(*named, links, facts)
		if err != nil {
			return t, err
		}
		t.Note, t.Bound = note, bound
		link = named
	} else if haveDefault {
		for _, l := range Match(links, facts).Active {
			if l.Match.Interface == def.Name {
				link = &l
				break
			}
		}
	}
	if link != nil {
		t.Link, t.Interface = link.Name, link.Match.Interface
		n := min(max(link.Autorate.ActiveReflectors, 1), len(link.Autorate.Reflectors))
		t.Reflectors = link.Autorate.Reflectors[:n]
		if d := link.Autorate.ProbeInterval.Std(); d > 0 {
			t.ProbeInterval = d
		}
	} else {
		t = defaultTarget(reflectors)
		if !haveDefault {
			return t, ErrNoDefaultRoute
		}
		t.Interface = def.Name
		t.Note = fmt.Sprintf("no policy matches this network; measuring the default route's interface %s", def.Name)
	}
	t.Facts, _ = facts.Interface(t.Interface)
	if len(reflectors) > 0 {
		t.Reflectors = reflectors
	}
	return t, nil
}

// namedLinkHere checks that the policy l, named by the user, is what a
// measurement here would measure: its interface can be measured
// (throughInterface), and l matches the current network (else the
// profile's key, l plus this gateway's MAC, is one macake watch never
// looks up for l). A policy that matches but is outranked on its
// interface is measured, with a note.
func namedLinkHere(l config.Link, links []config.Link, facts linkfacts.Facts) (note string, bound bool, err error) {
	iface := l.Match.Interface
	var notes []string
	if note, bound, err = throughInterface(facts, iface); err != nil {
		return "", false, fmt.Errorf("its %w", err)
	}
	if note != "" {
		notes = append(notes, note)
	}
	for _, v := range Match(links, facts).Verdicts {
		if v.Name != l.Name {
			continue
		}
		if !v.Matches {
			return "", false, fmt.Errorf("the policy does not match the current network: %s (see macake links)", v.Reason)
		}
		if !v.Active {
			notes = append(notes, fmt.Sprintf("%s is not the active policy on %s: %s", l.Name, iface, v.Reason))
		}
	}
	return strings.Join(notes, "; "), bound, nil
}

// throughInterface says whether a measurement can cross interface iface:
// it exists and is up; one that does not carry the default route is
// measured bound to it (its probes and its load leave through it), so it
// needs a gateway of its own (a route out of it). Errors start with
// "interface IF".
func throughInterface(facts linkfacts.Facts, iface string) (note string, bound bool, err error) {
	f, ok := facts.Interface(iface)
	if !ok {
		return "", false, fmt.Errorf("interface %s does not exist on this machine now (%s); measure while connected through it", iface, describeInterfaces(facts))
	}
	def, haveDefault := linkfacts.DefaultInterface(facts)
	switch {
	case haveDefault && def.Name == iface:
		return "", false, nil
	case !f.Up:
		return "", false, fmt.Errorf("interface %s is down; measure while connected through it", iface)
	case !f.GatewayIP.IsValid() && !haveDefault:
		return "", false, fmt.Errorf("interface %s has no gateway and nothing carries the default route, so the speed test cannot run over it: %w", iface, ErrNoDefaultRoute)
	case !f.GatewayIP.IsValid():
		return "", false, fmt.Errorf("interface %s has no gateway (no route leaves through it; %s carries the default route), so the speed test cannot run over it", iface, def.Name)
	case haveDefault:
		return fmt.Sprintf("%s does not carry the default route (%s does): the probes and the speed test are bound to %s", iface, def.Name, iface), true, nil
	}
	return "", true, nil
}

// InterfaceTarget is the target of measuring interface iface for a link
// that has no policy yet (macake init --measure): the default reflectors,
// or reflectors when given, bound to iface unless it carries the default
// route (throughInterface).
func InterfaceTarget(facts linkfacts.Facts, iface string, reflectors []config.Reflector) (measure.Target, error) {
	t := defaultTarget(reflectors)
	t.Interface = iface
	var err error
	if t.Note, t.Bound, err = throughInterface(facts, iface); err != nil {
		return t, err
	}
	t.Facts, _ = facts.Interface(iface)
	return t, nil
}

// defaultTarget probes what a policy with the default [autorate] would:
// its active reflectors (or reflectors when given) at its interval.
func defaultTarget(reflectors []config.Reflector) measure.Target {
	d := config.Defaults.Autorate
	t := measure.Target{Reflectors: d.Reflectors[:min(d.ActiveReflectors, len(d.Reflectors))], ProbeInterval: d.ProbeInterval.Std()}
	if len(reflectors) > 0 {
		t.Reflectors = reflectors
	}
	return t
}

// describeInterfaces lists the interfaces the facts know, for an error.
func describeInterfaces(f linkfacts.Facts) string {
	if len(f.Interfaces) == 0 {
		return "no interfaces known"
	}
	var names []string
	for _, i := range f.Interfaces {
		names = append(names, i.Name)
	}
	return "interfaces: " + strings.Join(names, ", ")
}
