// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"errors"
	"fmt"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/sense/linkfacts"
)

// ErrNoDefaultRoute is MeasureTarget's error when nothing carries the
// default route; each command adds the hint that fits it.
var ErrNoDefaultRoute = errors.New("no default route: not connected to a network?")

// Measured is the link a measurement (`macake measure`, `bench`,
// `monitor`) measures on the current network, and how it reaches it.
type Measured struct {
	// Link is the policy measured; nil when no policy matches on the
	// default route's interface (the measurement then takes the default
	// reflectors).
	Link *config.Link
	// Interface is the interface measured.
	Interface string
	// Note says what a person should know (another interface carries the
	// default route, the policy is outranked), "" when nothing.
	Note string
	// Bound: the interface does not carry the default route, so the load
	// and the probes must be bound to it.
	Bound bool
	// Facts are the interface's facts.
	Facts linkfacts.InterfaceFacts
}

// LinkToMeasure chooses what a measurement measures on the network facts
// describes, given the valid policies links. With named (one of links)
// it is that policy, which must match the current network on its
// interface, so that the profile lands under the key macake watch looks
// up; when that interface does not carry the default route the
// measurement is Bound to it. Without named, the policy matching the
// current network on the default-route interface is measured when there
// is one, else the default route's interface with no policy. Without a
// default route the error wraps ErrNoDefaultRoute.
func LinkToMeasure(facts linkfacts.Facts, links []config.Link, named *config.Link) (Measured, error) {
	var m Measured
	def, haveDefault := linkfacts.DefaultInterface(facts)
	switch {
	case named != nil:
		note, bound, err := namedLinkHere(*named, links, facts)
		if err != nil {
			return m, err
		}
		m.Link, m.Interface, m.Note, m.Bound = named, named.Match.Interface, note, bound
	case !haveDefault:
		return m, ErrNoDefaultRoute
	default:
		for _, l := range Match(links, facts).Active {
			if l.Match.Interface == def.Name {
				m.Link, m.Interface = &l, l.Match.Interface
				break
			}
		}
		if m.Link == nil {
			m.Interface = def.Name
			m.Note = fmt.Sprintf("no policy matches this network; measuring the default route's interface %s", def.Name)
		}
	}
	m.Facts, _ = facts.Interface(m.Interface)
	return m, nil
}

// InterfaceToMeasure is what a measurement of interface iface for a link
// that has no policy yet measures (macake init --measure): iface, bound
// to it unless it carries the default route (ThroughInterface).
func InterfaceToMeasure(facts linkfacts.Facts, iface string) (Measured, error) {
	m := Measured{Interface: iface}
	var err error
	if m.Note, m.Bound, err = ThroughInterface(facts, iface); err != nil {
		return m, err
	}
	m.Facts, _ = facts.Interface(iface)
	return m, nil
}

// namedLinkHere checks that the policy l, named by the user, is what a
// measurement here would measure: its interface can be measured
// (ThroughInterface), and l matches the current network (else the
// profile's key, l plus this gateway's MAC, is one macake watch never
// looks up for l). A policy that matches but is outranked on its
// interface is measured, with a note.
func namedLinkHere(l config.Link, links []config.Link, facts linkfacts.Facts) (note string, bound bool, err error) {
	iface := l.Match.Interface
	var notes []string
	if note, bound, err = ThroughInterface(facts, iface); err != nil {
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

// ThroughInterface says whether a measurement can cross interface iface:
// it exists and is up; one that does not carry the default route is
// measured bound to it (its probes and its load leave through it), so it
// needs a gateway of its own (a route out of it). Errors start with
// "interface IF".
func ThroughInterface(facts linkfacts.Facts, iface string) (note string, bound bool, err error) {
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
