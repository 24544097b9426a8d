// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/daemon"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

var watchCmd = &command{
	name:  "watch",
	args:  "[--teardown-on-exit] [--log-file PATH] [--log-level LEVEL] [--drift-interval DURATION]",
	short: "Run the daemon: reconcile on file and link changes, repair drift, run the controllers.",
	long: `The daemon, run by launchd (see 'macake install-daemon'); it stays in the
foreground and logs with one line per event (docs/OPERATIONS.md).

It applies the policy files as 'macake apply' does, then keeps the live state
matching them:
  - a saved policy file is applied within a second; a file that stops parsing
    keeps its link's last good policy in force (the error, with its line and
    column, is logged and shown by 'macake status') until it is fixed; a deleted
    file removes its link;
  - when the network changes (another Wi-Fi, Ethernet, a hotspot), the policy
    that matches it takes over, starting from the rate last known to be good on
    that network, and the old link's pipes and rules go;
  - every --drift-interval it re-reads everything and repairs what another tool
    changed: a flushed anchor, a deleted or reconfigured pipe, pf disabled (it
    takes a fresh pf reference). If pf.conf lost its dummynet-anchor line, it
    logs the exact line to add and applies nothing; it never edits pf.conf;
  - each active link in autorate or balanced mode runs a controller that probes
    the link's reflectors and sets the pipe rates from the measured latency,
    one 'dnctl pipe N config' per change. fixed and off links are observed only.

It holds the state lock while it runs, so 'apply' and 'down' say that it is
running instead of fighting it; 'macake status' asks it over the socket
STATE_DIR/watch.sock, and 'macake measure' hands it the measured profile
there, which it saves and applies at once. SIGTERM or SIGINT stops it after the step in progress:
it saves the known-good rates and leaves shaping in place for the next start
(or removes it with --teardown-on-exit). SIGHUP reopens the log file.

Logs go to log_file from macake.toml, else to --log-file, else to standard
error. A log file rotates itself at 10 MiB, keeping 5 old files.

Exit status: 0 after SIGTERM/SIGINT; 1 failure (including another watch
running); 64 usage; 69 pfctl/dnctl unavailable; 77 not root; 78 the daemon
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

// watchSensors, when not nil, replaces the real prober and counters
// (tests).
var watchSensors daemon.Sensors

func runWatch(e *env, args []string) int {
	fs := watchCmd.flags()
	var f watchFlags
	fs.BoolVar(&f.teardown, "teardown-on-exit", false, "remove everything macake owns when stopped (default: leave shaping in place)")
	fs.StringVar(&f.logFile, "log-file", "", "write the log to `PATH`, rotated, unless macake.toml sets log_file (the launchd job passes /var/log/macake/watch.log)")
	fs.StringVar(&f.logLevel, "log-level", "info", "lowest level logged: debug, info, warn or error")
	durationVar(fs, &f.drift, "drift-interval", daemon.DefaultDriftInterval, "how often to re-read everything and repair drift")
	if done, code := watchCmd.parse(e, fs, args); done {
		return code
	}
	if done, code := watchCmd.noArgs(e, fs); done {
		return code
	}
	level, err := logging.ParseLevel(f.logLevel)
	if err != nil || f.drift < 100*time.Millisecond {
		if err == nil {
			err = fmt.Errorf("--drift-interval %v is too short; use at least 100ms", f.drift)
		}
		fmt.Fprintf(e.stderr, "macake watch: %v\n", err)
		return exitUsage
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
	s := &session{e: e, cmd: "watch"}
	defer s.close()
	for _, step := range []func() (int, bool){s.chooseBackend, s.loadSettings} {
		if code, ok := step(); !ok {
			return code
		}
	}
	settings := s.policies.Settings

	logPath := settings.LogFile
	if logPath == "" {
		logPath = f.logFile
	}
	logger, err := logging.New(logging.Options{
		Format: logging.Format(settings.LogFormat), Level: level, Path: logPath, Stderr: e.stderr,
		File: logging.FileOptions{CrashOutput: true},
	})
	if err != nil {
		s.errorf("%v", err)
		return exitFailure
	}
	defer logger.Close()
	log := logger.Logger
	if logPath != "" {
		capStderrFile(e.stderr, maxStderrFile, log)
	}
	stopHUP := reopenOnHangup(logger)
	defer stopHUP()

	s.stateDir = e.stateDir
	if s.stateDir == defaultStateDir && settings.StateDir != "" {
		s.stateDir = settings.StateDir
	}
	if pid, holder, held, err := reconcile.Holder(s.stateDir); err == nil && held {
		// Say at once why nothing happens for a while: a restart waits
		// for the old watch to let go, anything else is refused after.
		log.Info("the state lock is held; waiting for it", "holder", holder, "pid", pid, "wait", watchLockWait.String())
	}
	lock, err := reconcile.AcquireLockWith(e.ctx, s.stateDir, reconcile.LockOptions{
		Wait: watchLockWait, Holder: reconcile.HolderWatch, SkipOwnershipCheck: e.euid() != 0,
	})
	if err != nil {
		if errors.Is(err, e.ctx.Err()) && e.ctx.Err() != nil {
			return exitOK
		}
		var locked *reconcile.LockedError
		if errors.As(err, &locked) && locked.Holder == reconcile.HolderWatch {
			// Another daemon, not an apply: its advice (stop it to
			// apply by hand) is not what a second watch needs.
			err = anotherWatch(locked.PID, runtime.GOOS)
		}
		log.Error("cannot take the state lock", logging.KeyError, err)
		return s.fail(err)
	}
	s.lock = lock
	st, err := state.Load(s.stateDir)
	if err != nil {
		if !errors.Is(err, state.ErrCorrupt) {
			log.Error("cannot read the state file", logging.KeyError, err)
			return s.fail(err)
		}
		log.Warn("the state file is corrupt; starting from an empty one (it is rebuilt from the live state)", logging.KeyError, err)
		if aside, err := state.SetAside(s.stateDir); err == nil {
			log.Warn("a copy of the corrupt state file is kept for you to look at", "path", aside)
		}
	}
	s.tokens = &reconcile.StateTokens{Dir: s.stateDir, State: st}
	if code, ok := s.openBackend(); !ok {
		log.Error("shaping is not available", "backend", s.backendName)
		return code
	}

	src, err := linkfacts.FromEnv(e.getenv, linkfacts.PolicyOptions())
	if err != nil {
		log.Error("cannot read the network's link facts", logging.KeyError, err)
		return s.fail(fmt.Errorf("%w: reading the link facts: %v", backend.ErrUnavailable, err))
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}

	var m *metrics.Metrics
	if settings.MetricsListen != "" {
		m = metrics.New(metrics.Options{Version: version, Commit: commit, Log: log})
		go func() {
			if err := m.Serve(e.ctx, settings.MetricsListen); err != nil {
				log.Error("the metrics endpoint is not served", logging.KeyError, err)
			}
		}()
	}

	sensors := watchSensors
	if sensors == nil {
		sensors = daemon.SystemSensors{}
	}
	d, err := daemon.New(daemon.Config{
		ConfigDir: e.configDir, StateDir: s.stateDir, LoadOptions: s.loadOptions(), Settings: settings,
		Backend: s.backend, Tokens: s.tokens,
		Facts:         daemon.LinkFacts{Source: src},
		ConfigChanges: daemon.Debounce(e.ctx, daemon.WatchConfigDir(e.ctx, e.configDir, log), daemon.DefaultDebounceQuiet, daemon.DefaultDebounceMax),
		Sensors:       sensors, Log: log, Metrics: m,
		DriftInterval: f.drift, TeardownOnExit: f.teardown, Version: version,
	})
	if err != nil {
		return s.fail(err)
	}

	socket := statusapi.SocketPath(s.stateDir)
	if ln, err := statusapi.Listen(socket); err != nil {
		log.Error("'macake status' cannot ask this daemon", logging.KeyError, err)
	} else {
		go statusapi.Serve(e.ctx, ln, statusapi.Handler{
			Status: d.Status,
			Measurement: func(ctx context.Context, m statusapi.Measurement) error {
				return d.TakeMeasurement(ctx, m.Key, m.Profile)
			},
		}, log)
	}

	if err := d.Run(e.ctx); err != nil {
		return exitFailure
	}
	return exitOK
}

// anotherWatch is the error of a watch that finds another one running:
// only one may run, and the way to restart it depends on the service
// manager.
func anotherWatch(pid int, goos string) error {
	who := "another macake watch"
	if pid > 0 {
		who += fmt.Sprintf(" (pid %d)", pid)
	}
	restart := "sudo launchctl kickstart -k system/org.macake.watch"
	if goos != "darwin" {
		restart = "sudo systemctl restart macake-watch"
	}
	return fmt.Errorf("%s is running and holds the state lock; only one watch runs at a time. "+
		"See 'macake status'; to restart it with new settings: %s", who, restart)
}

// maxStderrFile caps the file launchd sends the daemon's stderr to
// (launchd.DaemonStderrPath) when the daemon logs to a file of its own.
const maxStderrFile = 1 << 20

// capStderrFile empties w when it is a regular file larger than max: with
// its own log file, watch writes there only before its logger starts and
// when it crashes (the crash report is copied into the log as well), but
// a policy that keeps the daemon from starting repeats its message at
// every launchd retry, and launchd never truncates.
func capStderrFile(w io.Writer, max int64, log *slog.Logger) {
	f, ok := w.(*os.File)
	if !ok {
		return
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() <= max {
		return
	}
	if err := f.Truncate(0); err == nil {
		log.Info("emptied the standard error file, which had grown past its cap", "file", info.Name(), "bytes", info.Size())
	}
}

// reopenOnHangup reopens the log file on SIGHUP, for external rotators
// (logrotate, newsyslog); without it SIGHUP would kill the daemon. It
// returns the function that stops listening.
func reopenOnHangup(l *logging.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				if err := l.Reopen(); err != nil {
					l.Error("reopening the log file", logging.KeyEvent, string(logging.EventLogFile), logging.KeyError, err)
				} else {
					l.Info("log file reopened (SIGHUP)")
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
