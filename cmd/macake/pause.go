// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/daemon"
	"github.com/macake/macake/daemon/statusapi"
)

var pauseCmd = &command{
	name:  "pause",
	args:  "[--for DURATION] [--json] [LINK]",
	short: "Take the running watch's shaping off for a while; it comes back by itself.",
	long: `Asks the running 'macake watch' to take its shaping of LINK (every link
without one) off now: the link's pipes or qdiscs are removed, nothing of
another tool's is touched, and its controller stops. The link stays the
active one on its interface. The shaping comes back by itself when --for
has passed (at most 24h), or with 'macake resume'. A pause is kept in the
state file, so it survives a restart of watch until it ends; a clock that
reads before the pause began (set back, or after a reboot without the
right time) ends it. Pausing a paused link again moves its end.

Root and the members of the daemon settings' operator_group (admin on
macOS, none on Linux by default) may pause; everyone else is refused, and
told to use sudo. status, the status page, the metrics and the menu-bar
plugin show the pause with the time left.

Exit status: 0; 1 when watch refuses (a link no policy names, too many
requests at once) or the reconcile failed; 64 usage; 69 when watch is not
running; 77 when this user may not pause.`,
}

var resumeCmd = &command{
	name:  "resume",
	args:  "[--json] [LINK]",
	short: "Put the running watch's shaping back after a pause.",
	long: `Ends the pause of LINK at once, or without LINK every pause, and returns
once the shaping is back. One link cannot be resumed while every link is
paused: resume them all. Who may: as for 'macake pause'.

Exit status: 0; 1 when watch refuses (a link no policy names, one link
while every link is paused, too many requests at once) or the reconcile
failed; 64 usage; 69 when watch is not running; 77 when this user may not
resume.`,
}

func init() {
	pauseCmd.run = runPause
	resumeCmd.run = runResume
}

// defaultPause is how long `macake pause` pauses without --for.
const defaultPause = 30 * time.Minute

func runPause(e *env, args []string) int {
	fs := pauseCmd.flags()
	var d time.Duration
	durationVar(fs, &d, "for", defaultPause, fmt.Sprintf("how long the shaping stays off (at most %v)", daemon.MaxPause))
	asJSON := fs.Bool("json", false, "print the pause in force after it as JSON")
	done, code, links := pauseCmd.parseInterspersed(e, fs, args)
	if done {
		return code
	}
	if d <= 0 || d > daemon.MaxPause {
		fmt.Fprintf(e.stderr, "macake pause: --for %v: give a length above 0 and at most %v; 'macake resume' puts the shaping back\n", d, daemon.MaxPause)
		return exitcode.Usage
	}
	return sendPause(e, pauseCmd, links, d, *asJSON)
}

func runResume(e *env, args []string) int {
	fs := resumeCmd.flags()
	asJSON := fs.Bool("json", false, "print the pause in force after it (null) as JSON")
	done, code, links := resumeCmd.parseInterspersed(e, fs, args)
	if done {
		return code
	}
	return sendPause(e, resumeCmd, links, 0, *asJSON)
}

// sendPause asks the running watch to pause (d > 0) or resume links (at
// most one) and prints what it answered.
func sendPause(e *env, c *command, links []string, d time.Duration, asJSON bool) int {
	if len(links) > 1 {
		fmt.Fprintf(e.stderr, "macake %s: one link at a time, or none for every link (got %d)\n", c.name, len(links))
		return exitcode.Usage
	}
	link := ""
	if len(links) == 1 {
		link = links[0]
	}
	socket := statusapi.SocketPath(stateDirOf(e))
	p, err := statusapi.SendPause(e.ctx, socket, link, d)
	switch {
	case errors.Is(err, statusapi.ErrNotRunning):
		fmt.Fprintf(e.stderr, "macake %s: %v.\nPause and resume act on a running 'macake watch'; without it, '%s' takes the shaping off and '%s' puts it back.\n",
			c.name, err, e.invocation().Command(true, "down"), e.invocation().Command(true, "apply"))
		return exitcode.Unavailable
	case errors.Is(err, statusapi.ErrPermission):
		fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
		return exitcode.NoPerm
	case err != nil:
		fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
		return exitcode.Failure
	}
	if asJSON {
		b, _ := json.MarshalIndent(p, "", "  ")
		fmt.Fprintln(e.stdout, string(b))
		return exitcode.OK
	}
	what := "every link"
	if link != "" {
		what = link
	}
	if d == 0 {
		fmt.Fprintf(e.stdout, "Resumed macake's shaping of %s.\n", what)
		return exitcode.OK
	}
	until, left := "", ""
	if p != nil {
		until = " until " + p.Until.Local().Format("15:04:05")
		left = fmt.Sprintf(" (%v)", time.Duration(p.RemainingSeconds)*time.Second)
	}
	resume := "macake resume"
	if link != "" {
		resume += " " + link
	}
	fmt.Fprintf(e.stdout, "Paused macake's shaping of %s%s%s; it comes back by itself then, or with '%s'.\n", what, until, left, resume)
	return exitcode.OK
}
