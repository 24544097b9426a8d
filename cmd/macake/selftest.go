// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/cmd/macake/internal/shaperun"
	"github.com/macake/macake/selftest"
	"github.com/macake/macake/selftest/check"
)

var selftestCmd = &command{
	name:  "selftest",
	args:  "[--json] [--quick] [--force]",
	short: "Exercise pf and dummynet (Linux: tc) for real and compare every answer with what macake's tests assume.",
	long: `Runs, on this machine, every behaviour of pfctl, dnctl and the kernel that
macake and its emulator rely on: pf enable references and their tokens,
loading, listing and flushing an anchor, dnctl's pipe commands, listings,
rounding, limits and error messages, the routing socket and interface
counters, and a short measurement of a pipe on lo0. Each answer is compared
with the answer of the emulator macake's tests run against; one line per
check says ok, or shows the real bytes and the emulator's one above the
other. On Linux it checks the tc backend the same way, in two network
namespaces of its own (macake-selftest and macake-selftest-peer), and
measures TCP through its upload shaper.

It touches only scratch objects: the pf anchor com.apple/macake-selftest,
two dummynet pipes between 65000 and 65063 that nothing uses, pf enable
references of its own, and traffic on lo0 to one port of its own listener.
The main ruleset is read, never written. Everything is removed at the end,
also after Ctrl-C, SIGTERM or a failed check; what a kill -9 leaves is
recorded in the state directory and removed by the next selftest or by
'macake down'. It refuses to run while 'macake watch' runs, unless --force.

Exit status: 0 every check matches (or is skipped, saying why); 1 a check
differs or failed, or the run was interrupted; 64 usage; 69 pfctl/dnctl (tc/ip)
missing; 77 not root; 78 the daemon settings are invalid.`,
}

func init() { selftestCmd.run = runSelftest }

func runSelftest(e *env, args []string) int {
	fs := selftestCmd.flags()
	asJSON := fs.Bool("json", false, "print the whole report as one JSON document (attach it to a bug report)")
	quick := fs.Bool("quick", false, "skip the few seconds of shaped traffic (lo0 on a Mac, the scratch namespaces on Linux)")
	force := fs.Bool("force", false, "run even while macake watch is running")
	if done, code := selftestCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	if ok, code := e.requireRoot("selftest"); !ok {
		return code
	}
	s := shaperun.New(e.shaping(), "selftest", false)
	if code, ok := s.OpenSettings(); !ok {
		return code
	}
	settings := s.Policies.Settings
	o := selftest.Options{
		StateDir: settings.StateDirFor(e.stateDir, e.stateDir == defaultStateDir),
		Settings: settings, Getenv: e.getenv, Force: *force, Quick: *quick, Version: version,
		SkipOwnershipCheck: e.euid() != 0,
	}
	if !*asJSON {
		// Each check's line is printed as it ends; Started comes first.
		width := 0
		o.Started = func(r *check.Report, w int) { width = w; r.WriteHeader(e.stdout) }
		o.Progress = func(res check.Result) { check.WriteResult(e.stdout, res, width) }
	}
	rep, err := selftest.Run(e.ctx, o)
	if err != nil {
		s.Errorf("%v", err)
		if selftest.Unavailable(err) {
			return exitcode.Unavailable
		}
		return exitcode.Failure
	}
	if *asJSON {
		if err := rep.WriteJSON(e.stdout); err != nil {
			fmt.Fprintf(e.stderr, "macake selftest: %v\n", err)
			return exitcode.Failure
		}
	} else {
		rep.WriteFooter(e.stdout)
		if !rep.OK() && !rep.Interrupted {
			fmt.Fprintln(e.stdout, "\nA difference means macake (and the emulator its tests run against) assumes something this machine does not do.\nPlease report it with the whole report: sudo macake selftest --json > selftest.json")
		}
	}
	if !rep.OK() {
		return exitcode.Failure
	}
	return exitcode.OK
}
