// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/cmd/macake/internal/shaperun"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/docsite"
	"github.com/macake/macake/internal/terminal"
	"github.com/macake/macake/selftest"
	"github.com/macake/macake/state"
)

var applyCmd = &command{
	name:  "apply",
	args:  "[--dry-run [--out FILE]] [--link NAME] [--detailed-exitcode] [--show-commands] [--json] [--color auto|always|never] [FILE]",
	short: "Reconcile pf and dummynet (Linux: tc) with the policy files once; print the plan, then what was applied.",
	long: `Reads every policy file in the config directory, works out which policy is
active on which interface now (see 'macake links'), reads the live pf anchor
and dummynet pipes, prints the plan that makes them match, and applies it in a
safe order. Only what macake owns is ever changed: its pf anchor, the pipes in
its range that its state file or its anchor proves it made (other pipes there
are left alone with a warning) and its own pf enable reference. 'macake plan' is 'apply --dry-run'.

On Linux the same policies drive tc instead (MACAKE_BACKEND=pf|tc picks
one): macake's root qdiscs, its ingress filters and its ifb-macake* devices
(see ` + docsite.Page("LINUX.md", "") + `).

Each active link starts at its policy's rate (or the last rate the state file
knows to be good on that network); 'macake watch' then steers it.

Reviewed plans, as terraform does them: 'macake plan --out FILE' saves the
plan with fingerprints of what it was made from (the policy files and
macake.toml, the network of the interfaces they name, the state file's
pipe slots and the live state); 'macake apply FILE' applies exactly that
plan, and refuses (exit 1, saying what changed, changing nothing) if any
of it changed since ('apply --dry-run FILE' only checks and shows it).
--link NAME acts on one link alone: only its pipes
and rules change, every other link's live shaping stays as it is, and
other policies' problems do not stop it.

If any policy file or the daemon settings are invalid, apply changes nothing
and exits 78 with every problem listed, so a broken file never tears down
shaping that works. If pf's main ruleset has lost the
'dummynet-anchor "com.apple/*"' line, apply prints the line to add and
exits 1 without changing anything.

On macOS, reading pf and dummynet needs root, even for a dry run. Without
root a dry run cannot see what is live, so it says so and shows everything
macake would own for the links that match now (run it with sudo to see
only the differences); apply itself needs root.

Exit status: 0 success (with or without changes); 1 failure, including an
apply that stopped part-way (run apply again to continue from the live
state) and a saved plan that no longer fits; 2 only with --detailed-exitcode, when there were changes (planned in a
dry run, applied otherwise); 64 usage; 69 pfctl/dnctl (Linux: tc/ip) missing or unusable,
or a link's "auto" rates wait for 'macake measure' on this network; 77 not root
(except a dry run); 78 configuration invalid.`,
}

func init() { applyCmd.run = runApply }

// planCmd is `apply --dry-run` under the name terraform users type. It is
// a command of its own, so that it is listed and its help names it.
var planCmd = &command{
	name:  "plan",
	args:  "[--out FILE] [--link NAME] [--detailed-exitcode] [--show-commands] [--json] [--color auto|always|never]",
	short: "Print the plan that 'macake apply' would carry out, and change nothing ('apply --dry-run').",
	long: `The same as 'macake apply --dry-run': reads the policy files, the state file
and the live shaping, and prints the plan that makes them match, without
changing anything or taking the lock. On macOS, reading pf and dummynet
needs root; without it the plan is everything macake would own for the
links that match now (it says so). See 'macake apply --help' for the plan's
format. --out FILE saves the plan, with fingerprints of what it was made
from, for 'macake apply FILE' to apply exactly that plan once reviewed
(saving needs the live state: on macOS, root); --link NAME plans for one
link alone.

Exit status: 0 success (with or without changes); 1 failure; 2 only with
--detailed-exitcode, when there are changes; 64 usage; 69 pfctl/dnctl
(Linux: tc/ip) missing or unusable, or a link's "auto" rates wait for
'macake measure' on this network; 78 configuration invalid.`,
}

func init() {
	planCmd.run = func(e *env, args []string) int {
		e.invokedAs = planCmd
		return runApply(e, append([]string{"--dry-run"}, args...))
	}
}

// backendRunner, when not nil, runs the backend's commands instead of real
// processes: the CLI tests set it to the in-process pf/dummynet emulator.
var backendRunner execrun.Runner

// lockWait is how long a mutating command waits for another one.
var lockWait = state.DefaultLockWait

// shaping is what a run of apply, plan or down (shaperun) touches of
// this command line's world.
func (e *env) shaping() shaperun.Env {
	return shaperun.Env{
		Ctx: e.ctx, Stdout: e.stdout, Stderr: e.stderr, Getenv: e.getenv, EUID: e.euid(),
		ConfigDir: e.configDir, StateDir: e.stateDir, StateDirIsDefault: e.stateDir == defaultStateDir,
		Invocation: e.invocation(), Runner: backendRunner, LockWait: lockWait,
		SelftestLeftovers: selftestLeftovers,
	}
}

// selftestLeftovers is shaperun.Env.SelftestLeftovers: selftest's own
// removal (or description) of what a killed selftest left.
func selftestLeftovers(ctx context.Context, stateDir string, daemon settings.Daemon, getenv func(string) string, dryRun bool) (string, error) {
	o := selftest.Options{StateDir: stateDir, Settings: daemon, Getenv: getenv}
	if dryRun {
		return selftest.DescribeLeftovers(o)
	}
	return selftest.RemoveLeftovers(ctx, o)
}

func runApply(e *env, args []string) int {
	cmd := applyCmd
	if e.invokedAs != nil {
		cmd = e.invokedAs
	}
	fs := cmd.flags()
	var f shaperun.Flags
	color := terminal.ColorAuto
	fs.BoolVar(&f.DryRun, "dry-run", false, "print the plan only; change nothing (without root on macOS: everything macake would own, as the live state is unreadable)")
	fs.BoolVar(&f.Detailed, "detailed-exitcode", false, "exit 2 when there were changes (planned or applied)")
	fs.BoolVar(&f.ShowCommands, "show-commands", false, "print every pfctl/dnctl (Linux: tc/ip) command of the plan")
	fs.BoolVar(&f.JSON, "json", false, "print one JSON document (the plan and its outcome) instead of text")
	fs.Var(&color, "color", "colour the plan: auto (only on a terminal, without NO_COLOR), always or never")
	fs.StringVar(&f.Out, "out", "", "with --dry-run (macake plan): save the plan to `FILE`, for 'macake apply FILE' to apply exactly that plan once reviewed")
	fs.StringVar(&f.Link, "link", "", "act on the link `NAME` (links.d/NAME.toml) alone; every other link's shaping stays as it is")
	if done, code := cmd.parse(e, fs, args); done {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(e.stderr, "macake %s: one saved plan FILE at most, not %q\n", cmd.name, fs.Args())
		return exitcode.Usage
	}
	f.Saved, f.Color = fs.Arg(0), terminal.UseColor(color, e.stdout, e.getenv)
	switch {
	case cmd == planCmd && f.Saved != "":
		fmt.Fprintf(e.stderr, "macake plan: unexpected argument %q (to save the plan: macake plan --out %s)\n", f.Saved, f.Saved)
		return exitcode.Usage
	case f.Out != "" && !f.DryRun:
		fmt.Fprintln(e.stderr, "macake apply: --out saves a plan without applying it: run 'macake plan --out FILE'")
		return exitcode.Usage
	case f.Saved != "" && (f.Out != "" || f.Link != ""):
		fmt.Fprintf(e.stderr, "macake %s: a saved plan is applied as it was made (its --link with it): FILE takes no --out or --link\n", cmd.name)
		return exitcode.Usage
	}
	if !f.DryRun {
		if ok, code := e.requireRoot("apply"); !ok {
			return code
		}
	}
	s := shaperun.New(e.shaping(), cmd.name, f.DryRun)
	defer s.Close()
	return s.Apply(f)
}
