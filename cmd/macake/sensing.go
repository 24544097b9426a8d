// SPDX-License-Identifier: Apache-2.0

package main

// Helpers shared by monitor, measure and bench: the --reflector flag, and
// which link and reflectors to use.

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/sense/probe"
)

// reflectorList is a repeatable flag of reflectors (--reflector), in a
// policy's syntax: an address (ICMP), tcp:ADDR:PORT, udp:ADDR:PORT or
// auto:ADDR:PORT.
type reflectorList []config.Reflector

func (a *reflectorList) String() string {
	var s []string
	for _, x := range *a {
		s = append(s, x.String())
	}
	return strings.Join(s, ",")
}

func (a *reflectorList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		r, err := config.ParseReflector(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		if r.Addr.IsUnspecified() || r.Addr.IsMulticast() {
			return fmt.Errorf("%q is not a unicast IP address (reflectors are IP literals, e.g. 1.1.1.1 or tcp:1.1.1.1:443)", part)
		}
		r.Addr = r.Addr.Unmap()
		*a = append(*a, r)
	}
	return nil
}

// resolveTarget finds what to measure (see measureTarget) from the
// network's facts and the policies in the config directory. With linkName
// that policy must exist, and only then must the directory be valid; its
// errors name the flag.
func resolveTarget(e *env, linkName string, reflectors []config.Reflector) (measure.Target, error) {
	t := measure.Target{ProbeInterval: probe.DefaultInterval}
	facts, err := linkfacts.Read(e.ctx, e.getenv)
	if err != nil {
		return t, fmt.Errorf("reading the network's facts: %w", err)
	}
	var links []config.Link
	var lerr error
	if linkName != "" || e.configDirSet || dirExists(e.configDir) {
		opts := config.LoadOptions{SkipOwnershipCheck: e.euid() != 0}
		links, _, lerr = config.Load(e.configDir, opts)
	}
	var named *config.Link
	if linkName != "" {
		i := slices.IndexFunc(links, func(l config.Link) bool { return l.Name == linkName })
		switch {
		case i < 0 && lerr != nil:
			return t, fmt.Errorf("--link %s: %w", linkName, lerr)
		case i < 0:
			return t, fmt.Errorf("--link %s: no such policy in %s (see macake links)", linkName, e.configDir)
		}
		named = &links[i]
	}
	t, err = measureTarget(facts, links, named, reflectors)
	if err != nil && named != nil {
		err = fmt.Errorf("--link %s: %w", linkName, err)
	}
	return t, err
}

// measureTarget is what `macake measure`, `bench` and `monitor` measure
// on the network facts describes (desired.LinkToMeasure), probing as the
// measured policy does (measure.TargetOf); explicit reflectors replace
// its. Without a default route the error wraps desired.ErrNoDefaultRoute,
// and the target still carries the reflectors and the default probe
// interval, for a monitor that probes them anyway.
func measureTarget(facts linkfacts.Facts, links []config.Link, named *config.Link, reflectors []config.Reflector) (measure.Target, error) {
	m, err := desired.LinkToMeasure(facts, links, named)
	if err != nil {
		t := measure.Target{ProbeInterval: probe.DefaultInterval}
		if named == nil && errors.Is(err, desired.ErrNoDefaultRoute) {
			t = measure.TargetOf(nil, reflectors)
		}
		return t, err
	}
	t := measure.TargetOf(m.Link, reflectors)
	t.Interface, t.Note, t.Bound, t.Facts = m.Interface, m.Note, m.Bound, m.Facts
	return t, nil
}

// interfaceTarget is the target of measuring interface iface for a link
// that has no policy yet (macake init --measure): the default reflectors,
// or reflectors when given (desired.InterfaceToMeasure).
func interfaceTarget(facts linkfacts.Facts, iface string, reflectors []config.Reflector) (measure.Target, error) {
	t := measure.TargetOf(nil, reflectors)
	m, err := desired.InterfaceToMeasure(facts, iface)
	t.Interface, t.Note, t.Bound, t.Facts = m.Interface, m.Note, m.Bound, m.Facts
	return t, err
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
