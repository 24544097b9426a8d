// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"

	"github.com/macake/macake/config"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/sense/probe"
)

// measureTarget is what `macake measure`, `bench` and `monitor` measure
// on the network facts describes (desired.LinkToMeasure), with the
// measured policy's active reflectors and probe interval; explicit
// reflectors replace them. Without a default route the error wraps
// desired.ErrNoDefaultRoute, and the target still carries the reflectors
// and the default probe interval, for a monitor that probes them anyway.
func measureTarget(facts linkfacts.Facts, links []config.Link, named *config.Link, reflectors []config.Reflector) (measure.Target, error) {
	m, err := desired.LinkToMeasure(facts, links, named)
	if err != nil {
		t := measure.Target{ProbeInterval: probe.DefaultInterval}
		if named == nil && errors.Is(err, desired.ErrNoDefaultRoute) {
			t = defaultTarget(reflectors)
		}
		return t, err
	}
	t := defaultTarget(nil)
	if l := m.Link; l != nil {
		n := min(max(l.Autorate.ActiveReflectors, 1), len(l.Autorate.Reflectors))
		t = measure.Target{Link: l.Name, Reflectors: l.Autorate.Reflectors[:n], ProbeInterval: probe.DefaultInterval}
		if d := l.Autorate.ProbeInterval.Std(); d > 0 {
			t.ProbeInterval = d
		}
	}
	t.Interface, t.Note, t.Bound, t.Facts = m.Interface, m.Note, m.Bound, m.Facts
	if len(reflectors) > 0 {
		t.Reflectors = reflectors
	}
	return t, nil
}

// interfaceTarget is the target of measuring interface iface for a link
// that has no policy yet (macake init --measure): the default reflectors,
// or reflectors when given (desired.InterfaceToMeasure).
func interfaceTarget(facts linkfacts.Facts, iface string, reflectors []config.Reflector) (measure.Target, error) {
	t := defaultTarget(reflectors)
	m, err := desired.InterfaceToMeasure(facts, iface)
	t.Interface, t.Note, t.Bound, t.Facts = m.Interface, m.Note, m.Bound, m.Facts
	return t, err
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
