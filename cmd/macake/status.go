// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/daemon/statusread"
	"github.com/macake/macake/internal/terminal"
)

var statusCmd = &command{
	name:  "status",
	args:  "[--json [--history]] [--follow]",
	short: "Show links, the matched link per interface, live pipes and rates, controller state.",
	long: `Asks the running 'macake watch' over its socket (STATE_DIR/watch.sock,
readable by root and, on macOS, the admin group) and shows one row per active
link: interface, mode, controller state, the live download and upload rates,
the idle baseline, the delay above it, the load and the bufferbloat votes;
then per link its pipes (rate, queue, where the rate came from, the
controller's range) with their counters as tc -s shows them (what each
carried, dropped and holds queued), its reflectors' health, its last ten
minutes as sparklines (the shaper's and the achieved rate each way, the
round trip against its idle baseline), the last reconcile and its result,
config errors in force, problems (such as pf.conf missing its
dummynet-anchor line) and the daemon's last events.

Without a daemon it shows the static picture instead and says that watch is
not running: the policies and which one matches the network now, the rates a
start would use (the state file's known-good rates, else the policies'), the
live pipes if they can be read (that needs root), and the state file's
profiles. A user who may not ask the daemon gets the same static picture,
with watch said to be running when it holds the state lock (daemon.running
and daemon.permission_denied in --json).

--follow redraws the table once a second (one JSON document per line with
--json) until interrupted. --json prints the whole status in base units
(bit/s, bytes, seconds), versioned by format_version; --history adds each
link's history (one sample a second) and the last events to it.

Exit status: 0 (whether or not the daemon runs: see daemon.running in
--json); 1 when neither the daemon nor the static picture can be read; 64
usage.`,
}

func init() { statusCmd.run = runStatus }

// statusRefresh is --follow's refresh interval.
var statusRefresh = time.Second

// fetchStatus asks the daemon (tests replace it to play a socket this
// user may not open, which root never meets).
var fetchStatus = statusapi.FetchQuery

// hostGOOS picks advice that names the service manager: launchd on macOS,
// systemd on Linux.
var hostGOOS = runtime.GOOS

func runStatus(e *env, args []string) int {
	fs := statusCmd.flags()
	asJSON := fs.Bool("json", false, "print the status as JSON (one document per line with --follow)")
	follow := fs.Bool("follow", false, "refresh once a second until interrupted")
	history := fs.Bool("history", false, "with --json: add each link's last minutes and the daemon's last events")
	if done, code := statusCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	tty := terminal.IsTerminal(e.stdout)
	// The full text shows the history as sparklines and the last events;
	// JSON carries them when asked, --follow's table never.
	q := statusapi.Query{}
	if !*follow && (!*asJSON || *history) {
		q = statusapi.Query{History: true, Events: true}
	}
	for first := true; ; first = false {
		st, err := gatherStatus(e, q)
		if interrupted(e.ctx) {
			// Interrupted (Ctrl-C on --follow) mid-question: the answer,
			// if any, is not worth printing.
			return exitcode.OK
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "macake status: %v\n", err)
			return exitcode.Failure
		}
		switch {
		case *asJSON && *follow:
			b, _ := json.Marshal(st)
			fmt.Fprintln(e.stdout, string(b))
		case *asJSON:
			b, _ := json.MarshalIndent(st, "", "  ")
			fmt.Fprintln(e.stdout, string(b))
		case *follow:
			if tty {
				fmt.Fprint(e.stdout, "\x1b[H\x1b[2J") // home, clear: redraw in place
			} else if !first {
				fmt.Fprintln(e.stdout)
			}
			statusapi.WriteSummary(e.stdout, st, statusapi.TextOptions{Now: time.Now(), GOOS: hostGOOS})
		default:
			statusapi.WriteText(e.stdout, st, statusapi.TextOptions{Now: time.Now(), GOOS: hostGOOS})
		}
		if !*follow {
			return exitcode.OK
		}
		select {
		case <-e.ctx.Done():
			return exitcode.OK
		case <-time.After(statusRefresh):
		}
	}
}

// interrupted reports whether ctx is over. Its deadline counts as soon as
// it has passed: a dial bounded by the same deadline can fail with a
// timeout a moment before the context's own timer marks it done, and that
// half-answer ("not running") must not be printed as the status.
func interrupted(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// stateDirOf is the state directory as apply and watch choose it:
// --state-dir, or macake.toml's state_dir when the flag is left at its
// default. Commands that only read the settings for it ignore their
// problems (validate and doctor report them).
func stateDirOf(e *env) string {
	if e.stateDir != defaultStateDir {
		return e.stateDir
	}
	settings, _, err := settings.LoadDaemon(settings.DaemonFileFor(e.configDir), config.LoadOptions{SkipOwnershipCheck: true})
	if err != nil {
		return e.stateDir
	}
	return settings.StateDirFor(e.stateDir, true)
}

// gatherStatus reads the status (statusread.Read): the daemon's answer,
// else the static picture.
func gatherStatus(e *env, q statusapi.Query) (statusapi.Status, error) {
	return statusread.Read(e.ctx, statusread.Options{
		ConfigDir: e.configDir, StateDir: stateDirOf(e), NotRoot: e.euid() != 0,
		Getenv: e.getenv, Runner: backendRunner, Query: q, Fetch: fetchStatus,
	})
}
