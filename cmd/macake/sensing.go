// SPDX-License-Identifier: Apache-2.0

package main

// Helpers shared by monitor, measure and bench: the --reflector flag, and
// which link and reflectors to use.

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/macake/macake/config"
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

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
