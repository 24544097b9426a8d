// SPDX-License-Identifier: Apache-2.0

package main

// Helpers shared by monitor, measure and bench: the --reflector flag, and
// which link and reflectors to use (measuretarget).

import (
	"fmt"
	"strings"

	"github.com/macake/macake/cmd/macake/internal/measuretarget"
	"github.com/macake/macake/config"
	"github.com/macake/macake/sense/measure"
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

// resolveTarget is measuretarget.Resolve with this command line's policy
// directory and environment.
func resolveTarget(e *env, linkName string, reflectors []config.Reflector) (measure.Target, error) {
	return measuretarget.Resolve(e.ctx, measuretarget.Options{
		Getenv: e.getenv, ConfigDir: e.configDir, ConfigDirSet: e.configDirSet, NotRoot: e.euid() != 0,
	}, linkName, reflectors)
}
