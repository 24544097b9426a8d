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
// that policy, which must match the current network on the interface
// carrying the default route (the one the load and the probes leave by),
// so that what is measured is that link and the profile lands under the key
// macake watch looks up; without, the policy matching the current network
// on the default-route interface is used when there is one. Explicit
// reflectors replace the configured ones. Without a default route the
// error wraps ErrNoDefaultRoute, and the target still carries the
// reflectors and the default probe interval, for a monitor that probes
// them anyway.
func MeasureTarget(facts linkfacts.Facts, links []config.Link, named *config.Link, reflectors []config.Reflector) (measure.Target, error) {
	t := measure.Target{ProbeInterval: probe.DefaultInterval}
	def, haveDefault := linkfacts.DefaultInterface(facts)
	var link *config.Link
	if named != nil {
		note, err := namedLinkHere(*named, links, facts)
		if err != nil {
			return t, err
		}
		t.Note = note
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
		d := config.Defaults.Autorate
		t.Reflectors = d.Reflectors[:min(d.ActiveReflectors, len(d.Reflectors))]
		t.ProbeInterval = d.ProbeInterval.Std()
		if len(reflectors) > 0 {
			t.Reflectors = reflectors
		}
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
// measurement here would measure: its interface exists, carries the
// default route (the speed test's traffic and the probes follow it, so
// any other interface would be measured under l's name), and l matches
// the current network (else the profile's key, l plus this gateway's MAC,
// is one macake watch never looks up for l). A policy that matches but is
// outranked on its interface is measured, with a note.
func namedLinkHere(l config.Link, links []config.Link, facts linkfacts.Facts) (note string, err error) {
	iface := l.Match.Interface
	if _, ok := facts.Interface(iface); !ok {
		return "", fmt.Errorf("its interface %s does not exist on this machine now (%s); measure while connected through it", iface, describeInterfaces(facts))
	}
	def, ok := linkfacts.DefaultInterface(facts)
	if !ok {
		return "", fmt.Errorf("%w (%s carries no default route, so the speed test cannot run over it)", ErrNoDefaultRoute, iface)
	}
	if def.Name != iface {
		return "", fmt.Errorf("its interface %s does not carry the default route (%s does), so the speed test's traffic would not cross it; measure while %s is the primary connection", iface, def.Name, iface)
	}
	for _, v := range Match(links, facts).Verdicts {
		if v.Name != l.Name {
			continue
		}
		if !v.Matches {
			return "", fmt.Errorf("the policy does not match the current network: %s (see macake links)", v.Reason)
		}
		if !v.Active {
			return fmt.Sprintf("%s is not the active policy on %s: %s", l.Name, iface, v.Reason), nil
		}
	}
	return "", nil
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
