// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/macake/macake/cmd/macake/internal/shaperun"
	"github.com/macake/macake/internal/terminal"
	"github.com/macake/macake/plan"
)

var downCmd = &command{
	name:  "down",
	args:  "[--link NAME] [--dry-run] [--show-commands] [--json] [--color auto|always|never]",
	short: "Remove everything macake owns (its pf anchor, pipes and reference; on Linux its qdiscs, filters and IFBs); idempotent and safe after a crash.",
	long: `Flushes macake's pf anchor, deletes the dummynet pipes in macake's range that
macake made, and gives back macake's pf enable reference (pfctl -X), which
turns pf off again only if nothing else holds it. Nothing else is touched:
not the main ruleset, not other anchors, not other tools' pipes. On Linux
it removes macake's tc objects (root qdiscs 4d4b:, its ingress filters and
ifb-macake* devices) and nothing else.

It also removes what a 'macake selftest' killed with SIGKILL left (its
scratch anchor, pipes, pf references or network namespace, as its record
in the state directory names them), unless a selftest is running.

It reads no policy files, so it works while they are broken; it needs only
the daemon settings (anchor and pipe range). It works after a crash and with
a missing or corrupt state file: the pipes are macake's when the state file
gives their slot to a link or a rule in macake's anchor names them; a pipe
in the range that neither accounts for is left alone with a warning (remove
it with 'sudo dnctl pipe delete N' if it is a leftover of macake's). A
corrupt state file is moved aside and its pf token recovered when it still
reads; only a pf reference whose token was lost cannot be given back. Running it twice is
fine: the second run finds nothing to do. Afterwards the state file keeps the
measured profiles but no slots and no token.

--link NAME removes one link's shaping alone (its pipes and its rules) and
gives back its pipe slot; every other link's shaping stays as it is live,
and the pf reference is released only when nothing is left. The link is
known by its slot in the state file, so this needs the state file (without
it, 'macake down' removes everything). The next apply (or watch) shapes
the link again while its policy file is there and matches.

Exit status: 0 success; 1 failure (run it again); 64 usage; 69 pfctl/dnctl
(Linux: tc/ip) missing or unusable, or on macOS a dry run without root
(reading pf and dummynet needs root); 77 not root (except a dry run); 78 the
daemon settings are invalid.`,
}

func init() { downCmd.run = runDown }

func runDown(e *env, args []string) int {
	fs := downCmd.flags()
	var f shaperun.Flags
	color := terminal.ColorAuto
	fs.BoolVar(&f.DryRun, "dry-run", false, "print what would be removed; change nothing (on macOS reading pf and dummynet still needs root)")
	fs.BoolVar(&f.ShowCommands, "show-commands", false, "print every pfctl/dnctl (Linux: tc/ip) command")
	fs.BoolVar(&f.JSON, "json", false, "print one JSON document (the plan and its outcome) instead of text")
	fs.Var(&color, "color", "colour the output: auto, always or never")
	fs.StringVar(&f.Link, "link", "", "remove the shaping of the link `NAME` alone; every other link's stays as it is")
	if done, code := downCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	f.Color = terminal.UseColor(color, e.stdout, e.getenv)
	if !f.DryRun {
		if ok, code := e.requireRoot("down"); !ok {
			return code
		}
	}
	s := shaperun.New(e.shaping(), "down", f.DryRun)
	defer s.Close()
	out := s.Down(f)
	if f.JSON {
		plan.WriteJSON(e.stdout, out.Plan, f.DryRun, out.Applied, out.Errs)
	}
	return out.Code
}
