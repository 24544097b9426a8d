// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/doctor"
	"github.com/macake/macake/doctor/machine"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/internal/terminal"
)

var doctorCmd = &command{
	name:  "doctor",
	args:  "[--strict] [--json] [--verbose] [--color auto|always|never]",
	short: "Check what this machine supports and what is missing, with fixes.",
	long: `Checks everything macake depends on and prints one line per check, marked
✓ (ok), i (information), ! (warning) or ✗ (problem); every warning and problem
comes with its fix. Then a verdict: "Everything looks fine." or
"N problems, M warnings.".

It looks at: the backend this machine uses (pf + dummynet on macOS; tc on
Linux, with the kernel's qdiscs), whether pfctl and dnctl run, pf's status and
macake's pf reference, the dummynet-anchor hook line in pf's main ruleset,
macake's anchor and pipes against the state file, whether the live shaping
matches the policy files, other tools' anchors and pipes (listed, never
touched), Network Link Conditioner, the permission to open ICMP sockets, the
active policies' reflectors (a few echo requests each), the default route's
interface counters, the policy files and macake.toml, their ownership, the
state file, whether the daemon is installed and running, and how it is doing
by its own account over STATE_DIR/watch.sock (its last reconcile, policy file
errors it keeps the last good version for, links it cannot shape).

Doctor changes nothing and needs no root. Run as another user, the checks
that need root say so as warnings ("run with sudo to check …").

Exit status: 0 when there is no problem (warnings allowed); 1 when there is
a problem, or with --strict a warning; 64 usage.`,
}

func init() { doctorCmd.run = runDoctor }

// doctorTimeout bounds a whole doctor run: every check has its own
// timeout, this only keeps a hung child from hanging the command.
const doctorTimeout = time.Minute

// doctorSystemHook, when set, adjusts the inspected system before the
// checks run: the CLI tests replace the ICMP opener, the pinger, the
// counters, launchctl and the file ownership with fakes.
var doctorSystemHook func(*doctor.System)

func runDoctor(e *env, args []string) int {
	fs := doctorCmd.flags()
	strict := fs.Bool("strict", false, "fail (exit 1) on warnings too, not only on problems")
	asJSON := fs.Bool("json", false, "print one JSON document instead of text")
	verbose := fs.Bool("verbose", false, "also print the details of the lines that are ok")
	color := terminal.ColorAuto
	fs.Var(&color, "color", "colour the marks: auto (only on a terminal, without NO_COLOR), always or never")
	if done, code := doctorCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	sys, release := machine.Local(machine.Options{
		Getenv: e.getenv, ConfigDir: e.configDir, StateDir: e.stateDir,
		StateDirIsDefault: e.stateDir == defaultStateDir, Runner: backendRunner,
	})
	defer release()
	sys.EUID = e.euid()
	if doctorSystemHook != nil {
		doctorSystemHook(&sys)
	}
	ctx, cancel := context.WithTimeout(e.ctx, doctorTimeout)
	defer cancel()
	rep := doctor.Run(ctx, doctor.NewInspection(sys), doctor.Checks)
	if *asJSON {
		if err := report.WriteJSON(e.stdout, rep, *strict, sys.EUID == 0); err != nil {
			fmt.Fprintf(e.stderr, "macake doctor: %v\n", err)
			return exitcode.Failure
		}
	} else {
		report.WriteText(e.stdout, rep, report.TextOptions{
			Color: terminal.UseColor(color, e.stdout, e.getenv), ASCII: !terminal.UTF8Locale(e.getenv), Verbose: *verbose, Strict: *strict,
		})
	}
	if rep.Failed(*strict) {
		return exitcode.Failure
	}
	return exitcode.OK
}
