// SPDX-License-Identifier: Apache-2.0

// Package firstpolicy is what `macake init` decides around the policy it
// drafts (config/draft): the interface to write it for, its rates from a
// measurement, how to say what it matches, and the three commands to run
// next.
package firstpolicy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/draft"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
)

// Interface is the interface to write a policy for: iface when given,
// else the one that carries the default route.
func Interface(facts linkfacts.Facts, iface string) (linkfacts.InterfaceFacts, error) {
	if iface != "" {
		f, ok := facts.Interface(iface)
		if !ok {
			return f, fmt.Errorf("no interface %s here (interfaces: %s)", iface, interfaceNames(facts))
		}
		return f, nil
	}
	f, ok := linkfacts.DefaultInterface(facts)
	if !ok {
		return f, fmt.Errorf("no interface carries the default route, so there is no network to write a policy for; connect first, or name the interface with --interface")
	}
	return f, nil
}

// SetMeasured gives d the rates of a measurement of its link: 95 % of
// each direction's capacity (config.FromCapacity), noting what was
// measured when. A direction without capacity is an error: there is
// nothing to write.
func SetMeasured(d *draft.Draft, rep *measure.Report, when time.Time) error {
	down, up := units.Rate(rep.Download.BitsPerSecond), units.Rate(rep.Upload.BitsPerSecond)
	if down <= 0 || up <= 0 {
		return fmt.Errorf("the measurement found no capacity (download %s, upload %s)", down.Human(), up.Human())
	}
	d.Measured = &draft.Measured{Download: down, Upload: up, When: when}
	d.Download, d.Upload = config.FromCapacity(down), config.FromCapacity(up)
	return nil
}

// interfaceNames lists the interfaces the facts know, sorted, for an
// error.
func interfaceNames(f linkfacts.Facts) string {
	var names []string
	for _, i := range f.Interfaces {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Matches says what a policy written for f matches: "interface en0,
// gateway 74:24:9f:00:00:01, Wi-Fi "home"".
func Matches(f linkfacts.InterfaceFacts) string {
	keys := []string{"interface " + f.Name}
	if len(f.GatewayMAC) > 0 {
		keys = append(keys, "gateway "+f.GatewayMAC.String())
	} else if f.GatewayIP.IsValid() {
		keys = append(keys, "gateway "+f.GatewayIP.String())
	}
	if f.SSID != "" {
		keys = append(keys, "Wi-Fi "+fmt.Sprintf("%q", f.SSID))
	}
	return strings.Join(keys, ", ")
}

// Next are the three commands to run after init, with what each does:
// measure first when the rates are "auto"; install-daemon where a service
// manager can keep watch running (installable), else apply. command
// renders a command line as the person ran macake (config.Invocation's
// Command), so each repeats the directories init was given.
func Next(command func(asRoot bool, args ...string) string, d draft.Draft, installable bool) [][2]string {
	first := [2]string{command(false, "validate"), "check it, and the other policies"}
	if d.Download == 0 {
		first = [2]string{command(true, "measure", "--link", d.Name), "measure the link: \"auto\" becomes 95 % of it"}
	}
	last := [2]string{command(true, "install-daemon"), "shape it now and keep it adapting (or: apply)"}
	if !installable {
		// No launchd or systemd to keep watch running: shape it once.
		last = [2]string{command(true, "apply"), "shape it now (run `macake watch` under your init to keep it adapting)"}
	}
	return [][2]string{first, {command(true, "plan"), "see what applying it would change"}, last}
}
