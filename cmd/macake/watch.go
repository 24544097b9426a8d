// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/cmd/macake/internal/shaperun"
	"github.com/macake/macake/daemon"
	"github.com/macake/macake/daemon/sensors"
	"github.com/macake/macake/internal/docsite"
	"github.com/macake/macake/logging"
)

var watchCmd = &command{
	name:  "watch",
	args:  "[--teardown-on-exit] [--log-file PATH] [--log-level LEVEL] [--drift-interval DURATION]",
	short: "Run the daemon: reconcile on file and link changes, repair drift, run the controllers.",
	long: `The daemon, run by launchd or systemd (see 'macake install-daemon'); it stays in the
foreground and logs with one line per event (` + docsite.Page("OPERATIONS.md", "logs-and-metrics") + `).

It applies the policy files as 'macake apply' does, then keeps the live state
matching them:
  - a saved policy file is applied within a second; a file that stops parsing
    keeps its link's last good policy in force (the error, with its line and
    column, is logged and shown by 'macake status') until it is fixed; a deleted
    file removes its link;
  - when the network changes (another Wi-Fi, Ethernet, a hotspot), the policy
    that matches it takes over, starting from the rate last known to be good on
    that network, and the old link's shaping goes;
  - every --drift-interval it re-reads everything and repairs what another tool
    changed: on macOS a flushed anchor, a deleted or reconfigured pipe, pf
    disabled (it takes a fresh pf reference); if pf.conf lost its
    dummynet-anchor line, it logs the exact line to add and applies nothing (it
    never edits pf.conf); on Linux a deleted or replaced qdisc, filter or IFB;
  - each active link in autorate or balanced mode runs a controller that probes
    the link's reflectors and sets the shaper's rates from the measured latency,
    one change per decision ('dnctl pipe N config' on macOS, a qdisc change
    over netlink on Linux). fixed and off links are observed only.

It holds the state lock while it runs, so 'apply' and 'down' say that it is
running instead of fighting it; 'macake status' asks it over the socket
STATE_DIR/watch.sock, and 'macake measure' hands it the measured profile
there, which it saves and applies at once. SIGTERM or SIGINT stops it after the step in progress:
it saves the known-good rates and leaves shaping in place for the next start
(or removes it with --teardown-on-exit). SIGHUP reopens the log file.

Logs go to log_file from macake.toml, else to --log-file, else to standard
error. A log file rotates itself at 10 MiB, keeping 5 old files.

Exit status: 0 after SIGTERM/SIGINT; 1 failure (including another watch
running); 64 usage; 69 pfctl/dnctl (Linux: tc/ip) unavailable; 77 not root; 78 the daemon
settings (macake.toml) are invalid. Policy file errors never stop it.`,
}

func init() { watchCmd.run = runWatch }

// watchFlags are watch's flags.
type watchFlags struct {
	teardown bool
	logFile  string
	logLevel string
	drift    time.Duration
}

// watchLockWait is how long a starting watch waits for the state lock: a
// watch restarted by launchd may start while the old one still exits.
var watchLockWait = 10 * time.Second

// watchGCPercent is watch's GOGC unless the environment sets one.
const watchGCPercent = 25

// watchSensors, when not nil, replaces the real prober and counters
// (tests).
var watchSensors sensors.Opener

func runWatch(e *env, args []string) int {
	fs := watchCmd.flags()
	var f watchFlags
	fs.BoolVar(&f.teardown, "teardown-on-exit", false, "remove everything macake owns when stopped (default: leave shaping in place)")
	fs.StringVar(&f.logFile, "log-file", "", "write the log to `PATH`, rotated, unless macake.toml sets log_file (the launchd job passes /var/log/macake/watch.log)")
	fs.StringVar(&f.logLevel, "log-level", "info", "the lowest `LEVEL` logged: debug, info, warn or error")
	durationVar(fs, &f.drift, "drift-interval", daemon.DefaultDriftInterval, "how often to re-read everything and repair drift")
	if done, code := watchCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	level, err := logging.ParseLevel(f.logLevel)
	if err != nil || f.drift < 100*time.Millisecond {
		if err == nil {
			err = fmt.Errorf("--drift-interval %v is too short; use at least 100ms", f.drift)
		}
		fmt.Fprintf(e.stderr, "macake watch: %v\n", err)
		return exitcode.Usage
	}
	if ok, code := e.requireRoot("watch"); !ok {
		return code
	}
	if e.getenv("GOMAXPROCS") == "" {
		// The daemon's work is tiny (a probe's is a few hundred ns); what
		// it costs is waking up, about 45 times a second. With one P a
		// goroutine readied by another (a reply for the controller) runs
		// on the thread that readied it, instead of waking a second
		// thread that finds nothing to do: a quarter less CPU, measured
		// in docs/MEASUREMENTS.md.
		runtime.GOMAXPROCS(1)
	}
	if e.getenv("GOGC") == "" {
		// The live heap is well under a megabyte, but at the default
		// GOGC the heap grows to 4 MiB before the first collection (the
		// runtime's minimum goal) and stays resident; each rate change
		// leaves a few KB of netlink buffers. At 25 the goal is 1 MiB: a
		// collection every few seconds under load, each well under a
		// millisecond, for 1.8 MiB less resident (docs/MEASUREMENTS.md).
		debug.SetGCPercent(watchGCPercent)
	}
	s := shaperun.New(e.shaping(), "watch", false)
	if code, ok := s.OpenSettings(); !ok {
		return code
	}
	code := exitcode.OK
	err = daemon.Serve(e.ctx, daemon.ServeOptions{
		ConfigDir: e.configDir, StateDir: e.stateDir, StateDirIsDefault: e.stateDir == defaultStateDir,
		Settings: s.Policies.Settings, LoadOptions: s.Session.LoadOptions,
		BackendName: s.BackendName, Runner: backendRunner, Getenv: e.getenv,
		LogLevel: level, LogFile: f.logFile, Stderr: e.stderr, LockWait: watchLockWait, Sensors: watchSensors,
		DriftInterval: f.drift, TeardownOnExit: f.teardown, Version: version, Commit: commit,
		StartFailed: func(err error) { code = s.Fail(err) },
	})
	if err != nil && code == exitcode.OK {
		code = exitcode.Failure // the daemon stopped on an error it logged
	}
	return code
}
