// SPDX-License-Identifier: Apache-2.0

// Package measuretarget decides what `macake measure`, `bench`, `monitor`
// and `init --measure` measure: which link, through which interface, and
// which reflectors, from the network's facts and the policy files.
package measuretarget

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/macake/macake/config"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/sense/probe"
)

// Options are where Resolve reads the network and the policies.
type Options struct {
	// Getenv reads the environment (MACAKE_LINK_FACTS replaces the
	// network's detection).
	Getenv func(string) string
	// ConfigDir is the policy directory; ConfigDirSet tells that it was
	// given (--config-dir), so it must exist.
	ConfigDir    string
	ConfigDirSet bool
	// NotRoot skips the policy files' ownership checks.
	NotRoot bool
}

// Resolve finds what to measure (see Of) from the network's facts and the
// policies in the config directory. With linkName that policy must
// exist, and only then must the directory be valid; its errors name the
// flag.
func Resolve(ctx context.Context, o Options, linkName string, reflectors []config.Reflector) (measure.Target, error) {
	t := measure.Target{ProbeInterval: probe.DefaultInterval}
	facts, err := linkfacts.Read(ctx, o.Getenv)
	if err != nil {
		return t, fmt.Errorf("reading the network's facts: %w", err)
	}
	var links []config.Link
	var lerr error
	if linkName != "" || o.ConfigDirSet || dirExists(o.ConfigDir) {
		links, _, lerr = config.Load(o.ConfigDir, config.LoadOptions{SkipOwnershipCheck: o.NotRoot})
	}
	var named *config.Link
	if linkName != "" {
		i := slices.IndexFunc(links, func(l config.Link) bool { return l.Name == linkName })
		switch {
		case i < 0 && lerr != nil:
			return t, fmt.Errorf("--link %s: %w", linkName, lerr)
		case i < 0:
			return t, fmt.Errorf("--link %s: no such policy in %s (see macake links)", linkName, o.ConfigDir)
		}
		named = &links[i]
	}
	t, err = Of(facts, links, named, reflectors)
	if err != nil && named != nil {
		err = fmt.Errorf("--link %s: %w", linkName, err)
	}
	return t, err
}

// Of is what is measured on the network facts describes
// (desired.LinkToMeasure), probing as the measured policy does
// (measure.TargetOf); explicit reflectors replace its. Without a default
// route the error wraps desired.ErrNoDefaultRoute, and the target still
// carries the reflectors and the default probe interval, for a monitor
// that probes them anyway.
func Of(facts linkfacts.Facts, links []config.Link, named *config.Link, reflectors []config.Reflector) (measure.Target, error) {
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

// Interface is the target of measuring interface iface for a link that
// has no policy yet (macake init --measure): the default reflectors, or
// reflectors when given (desired.InterfaceToMeasure).
func Interface(facts linkfacts.Facts, iface string, reflectors []config.Reflector) (measure.Target, error) {
	t := measure.TargetOf(nil, reflectors)
	m, err := desired.InterfaceToMeasure(facts, iface)
	t.Interface, t.Note, t.Bound, t.Facts = m.Interface, m.Note, m.Bound, m.Facts
	return t, err
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
