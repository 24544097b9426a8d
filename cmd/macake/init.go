// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/cmd/macake/internal/firstpolicy"
	"github.com/macake/macake/cmd/macake/internal/servicerun"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/draft"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/sense/linkfacts"
)

var initCmd = &command{
	name:  "init",
	args:  "[NAME] [--mode MODE] [--download RATE --upload RATE | --measure] [--interface IF] [--priority N]",
	short: "Write a first policy file for the network this machine is on now.",
	long: `Detects the interface that carries the default route, its gateway's IP and
MAC address and, where the OS still tells it, the Wi-Fi network's name
(SSID), and writes a commented policy file for that network to the policy
directory (links.d/NAME.toml), asking nothing it can detect. The policy
matches by the gateway's MAC (and the SSID when known), so it applies only
on this network. Every other key is there, commented out, with its default.

The rates: --download and --upload set them; --measure measures the link
first (as 'macake measure' does: about 20 seconds of load; the measurement
flags apply; an --interface that does not carry the default route is
measured through itself) and writes 95 % of what it measured; without either, the
file says "auto", which is 95 % of what 'macake measure' measures later on
this network.

NAME defaults to the SSID, else the interface, as a valid link name
("My iPhone" becomes my-iphone). init never overwrites a file: if NAME.toml
exists it says so and exits 1. What it writes passes 'macake validate': a
second policy for the same network needs another --priority (the higher
one wins here), else nothing is written. It then prints the next three
commands to run.

Writing /etc/macake/links.d needs root.

Exit status: 0 the policy was written; 1 nothing was written (the file
exists, no network was detected, the measurement failed, or the policy
directory is not writable); 64 usage.`,
}

func init() { initCmd.run = runInit }

func runInit(e *env, args []string) int {
	fs := initCmd.flags()
	var mode config.Mode
	var down, up units.Rate
	var iface string
	var priority int
	var doMeasure bool
	var m measureOpts
	fs.Func("mode", "shaper `MODE`: autorate (default), balanced, fixed or off", func(s string) error { return mode.UnmarshalText([]byte(s)) })
	fs.Var(&down, "download", "base download rate, e.g. 250mbit (default: \"auto\", or measured with --measure)")
	fs.Var(&up, "upload", "base upload rate, e.g. 20mbit")
	fs.BoolVar(&doMeasure, "measure", false, "measure the link first and write 95 % of its capacity as the rates")
	fs.StringVar(&iface, "interface", "", "the interface `IF` to shape (default: the one carrying the default route)")
	fs.IntVar(&priority, "priority", 0, "match.priority: where several policies match this network, the highest wins")
	m.register(fs)
	done, code, operands := initCmd.parseInterspersed(e, fs, args)
	if done {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "macake init: "+format+"\n", a...)
		return exitcode.Usage
	}
	if len(operands) > 1 {
		return usage("one link NAME at most, not %q", operands)
	}
	name := ""
	if len(operands) == 1 {
		name = operands[0]
		if err := draft.CheckName(name); err != nil {
			return usage("%v", err)
		}
	}
	if doMeasure && (down != 0 || up != 0) {
		return usage("--measure writes the measured rates: give it or --download/--upload, not both")
	}
	if (down == 0) != (up == 0) {
		return usage("give both --download and --upload (or neither)")
	}
	if doMeasure {
		if err := m.check(); err != nil {
			return usage("%v", err)
		}
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "macake init: "+format+"\n", a...)
		return exitcode.Failure
	}

	facts, err := linkfacts.Read(e.ctx, e.getenv)
	if err != nil {
		return fail("reading the network's facts: %v", err)
	}
	f, err := firstpolicy.Interface(facts, iface)
	if err != nil {
		return fail("%v", err)
	}
	d := draft.Draft{
		Name: name, Interface: f.Name, GatewayIP: f.GatewayIP, GatewayMAC: f.GatewayMAC, SSID: f.SSID,
		Priority: priority, Mode: mode, Download: down, Upload: up, Written: time.Now(),
	}
	if d.Name == "" {
		if d.Name = draft.NameFor(f.SSID, f.Name); d.Name == "" {
			return usage("no link name can be made from %q; name it: macake init NAME", f.Name)
		}
	}
	if doMeasure {
		fmt.Fprintf(e.stderr, "Measuring %s before writing its policy (about %s) …\n", f.Name, (m.idle + 2*m.duration).Round(time.Second))
		m.iface = f.Name
		rep, err := e.measureOnce(m)
		if err != nil {
			return fail("measuring: %v; nothing written", err)
		}
		if err := firstpolicy.SetMeasured(&d, rep, time.Now()); err != nil {
			return fail("%v; nothing written", err)
		}
	}
	text, err := d.Render()
	if err != nil {
		return fail("%v", err)
	}
	path, err := draft.WriteNewPolicy(e.configDir, d.Name, text)
	if err != nil {
		if errors.Is(err, draft.ErrPolicyExists) || errors.As(err, new(*draft.ConflictError)) {
			return fail("%v", err)
		}
		return fail("%v%s", err, rootHint(e))
	}
	fmt.Fprintf(e.stdout, "Wrote %s: link %q for %s.\n", path, d.Name, firstpolicy.Matches(f))
	if d.Download == 0 {
		fmt.Fprintf(e.stdout, "Its rates are \"auto\": measure the link before applying it.\n")
	}
	fmt.Fprintln(e.stdout, "\nNext:")
	_, noManager := servicerun.Installable(serviceHost(e))
	next := firstpolicy.Next(e.invocation().Command, d, noManager == nil)
	width := 0
	for _, c := range next {
		width = max(width, len(c[0]))
	}
	for _, c := range next {
		fmt.Fprintf(e.stdout, "  %-*s  # %s\n", width, c[0], c[1])
	}
	return exitcode.OK
}

// rootHint suggests sudo for a write that failed without root.
func rootHint(e *env) string {
	if e.euid() != 0 {
		return " (writing the policy directory needs root: run it with sudo)"
	}
	return ""
}
