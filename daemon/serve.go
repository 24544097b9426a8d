// SPDX-License-Identifier: Apache-2.0

package daemon

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
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/daemon/configwatch"
	"github.com/macake/macake/daemon/operator"
	"github.com/macake/macake/daemon/sensors"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/daemon/statuspage"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/debounce"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/session"
	"github.com/macake/macake/state"
)

// ServeOptions are the choices Serve assembles a running watch from: what
// the command line and the daemon settings decided, and the seams tests
// replace. ConfigDir, StateDir and Stderr are required.
type ServeOptions struct {
	// ConfigDir is the policy directory. StateDir holds the state file and
	// the lock; when StateDirIsDefault (no --state-dir), the settings'
	// state_dir takes its place, as for every other command.
	ConfigDir, StateDir string
	StateDirIsDefault   bool
	// Settings are the daemon settings (macake.toml), already validated.
	Settings settings.Daemon
	// LoadOptions are the policy files' load options. Their
	// SkipOwnershipCheck also skips the state directory's check: both are
	// for runs by someone other than root.
	LoadOptions config.LoadOptions
	// BackendName names the chosen backend in the log line of a backend
	// that cannot be opened.
	BackendName string
	// Runner runs the backend's commands; nil runs real processes.
	Runner execrun.Runner
	// Getenv reads the environment (tool paths, MACAKE_LINK_FACTS); nil
	// is os.Getenv.
	Getenv func(string) string
	// LogLevel is the lowest level logged; nil is info.
	LogLevel slog.Leveler
	// LogFile is the log file unless the settings name one (log_file); ""
	// logs to Stderr.
	LogFile string
	// Stderr is the process's standard error: the log when there is no
	// log file, and otherwise the file launchd sends stderr to, which
	// Serve empties at start once it is past its cap.
	Stderr io.Writer
	// LockWait is how long to wait for the state lock: a watch restarted
	// by launchd may start while the old one still exits.
	LockWait time.Duration
	// Sensors measure the links for the controllers; nil is sensors.System.
	Sensors sensors.Opener
	// DriftInterval and TeardownOnExit are Config's.
	DriftInterval  time.Duration
	TeardownOnExit bool
	// Version and Commit are reported by status and the metrics.
	Version, Commit string
	// StartFailed, when set, is told the error that keeps the daemon from
	// starting at the moment it does, between the log lines around it, so
	// that a CLI prints it in its place; Serve then returns it.
	StartFailed func(error)
}

// Serve is `macake watch` from start to stop: it builds the logger (with
// SIGHUP reopening its file), takes the state lock, loads the state file
// (setting a corrupt one aside), opens the backend and the link facts,
// starts the optional metrics endpoint and the status socket, and runs the
// Daemon until ctx ends. It returns nil after a clean shutdown, and also
// when ctx ends while it waits for the lock; an error that kept the daemon
// from starting (also given to StartFailed), or Run's error, otherwise.
func Serve(ctx context.Context, o ServeOptions) error {
	startFailed := func(err error) error {
		if o.StartFailed != nil {
			o.StartFailed(err)
		}
		return err
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	settings := o.Settings

	logPath := settings.LogFile
	if logPath == "" {
		logPath = o.LogFile
	}
	logger, err := logging.New(logging.Options{
		Format: logging.Format(settings.LogFormat), Level: o.LogLevel, Path: logPath, Stderr: o.Stderr,
		File: logging.FileOptions{CrashOutput: true, CheckOwnership: !o.LoadOptions.SkipOwnershipCheck},
	})
	if err != nil {
		return startFailed(err)
	}
	defer logger.Close()
	// The status page lists the log's last events: keep them as they go
	// to the log.
	recent := logging.NewRecent(eventsShown, slog.LevelInfo)
	log := slog.New(logging.Tee(logger.Handler(), recent))
	if logPath != "" {
		capStderrFile(o.Stderr, maxStderrFile, log)
	}
	stopHUP := reopenOnHangup(logger)
	defer stopHUP()

	if pid, holder, held, err := state.Holder(settings.StateDirFor(o.StateDir, o.StateDirIsDefault)); err == nil && held {
		// Say at once why nothing happens for a while: a restart waits
		// for the old watch to let go, anything else is refused after.
		log.Info("the state lock is held; waiting for it", "holder", holder, "pid", pid, "wait", o.LockWait.String())
	}
	ses, err := session.Open(ctx, session.Options{
		ConfigDir: o.ConfigDir, StateDir: o.StateDir, StateDirIsDefault: o.StateDirIsDefault, Settings: &settings,
		Lock: &state.LockOptions{
			Wait: o.LockWait, Holder: state.HolderWatch, SkipOwnershipCheck: o.LoadOptions.SkipOwnershipCheck, MayCreate: o.StateDirIsDefault,
		},
		SkipOwnershipCheck: o.LoadOptions.SkipOwnershipCheck, Runner: o.Runner, Getenv: getenv,
	})
	if err == nil {
		defer ses.Close()
	}
	if ses.PruneErr != nil {
		log.Warn("cannot prune the last good copies of removed policy files", logging.KeyError, ses.PruneErr)
	}
	if errors.Is(ses.StateErr, state.ErrCorrupt) {
		log.Warn("the state file is corrupt; starting from an empty one (it is rebuilt from the live state)", logging.KeyError, ses.StateErr)
		if ses.AsideErr == nil {
			log.Warn("a copy of the corrupt state file is kept for you to look at", "path", ses.Aside)
		}
	}
	switch session.StepOf(err) {
	case "":
	case session.StepLock:
		if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
			return nil
		}
		if locked, ok := errors.AsType[*state.LockedError](err); ok && locked.Holder == state.HolderWatch {
			// Another daemon, not an apply: its advice (stop it to
			// apply by hand) is not what a second watch needs.
			err = anotherWatch(locked.PID, runtime.GOOS)
		}
		log.Error("cannot take the state lock", logging.KeyError, err)
		return startFailed(err)
	case session.StepState:
		log.Error("cannot read the state file", logging.KeyError, err)
		return startFailed(err)
	case session.StepBackend, session.StepChoose:
		startFailed(err)
		log.Error("shaping is not available", "backend", o.BackendName)
		return err
	default:
		return startFailed(err)
	}
	stateDir, tokens, b := ses.StateDir, ses.State, ses.Backend

	src, err := linkfacts.FromEnv(getenv, linkfacts.PolicyOptions())
	if err != nil {
		log.Error("cannot read the network's link facts", logging.KeyError, err)
		return startFailed(fmt.Errorf("%w: reading the link facts: %v", backend.ErrUnavailable, err))
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}

	var m *metrics.Metrics
	if settings.MetricsListen != "" {
		m = metrics.New(metrics.Options{Version: o.Version, Commit: o.Commit, Log: log})
		go func() {
			if err := m.Serve(ctx, settings.MetricsListen); err != nil {
				log.Error("the metrics endpoint is not served", logging.KeyError, err)
			}
		}()
	}

	opener := o.Sensors
	if opener == nil {
		opener = sensors.System{}
	}
	d, err := New(Config{
		ConfigDir: o.ConfigDir, StateDir: stateDir, LoadOptions: o.LoadOptions, Settings: settings,
		Backend: b, Tokens: tokens,
		Facts:         sensors.LinkFacts{Source: src},
		ConfigChanges: debounce.Bursts(ctx, configwatch.Watch(ctx, o.ConfigDir, log), configwatch.DefaultDebounceQuiet, configwatch.DefaultDebounceMax),
		Sensors:       opener, Log: log, LogFile: logPath, Metrics: m, Events: recent,
		DriftInterval: o.DriftInterval, TeardownOnExit: o.TeardownOnExit, Version: o.Version,
	})
	if err != nil {
		return startFailed(err)
	}

	if settings.StatusPageListen != "" {
		page := statuspage.Options{Status: d.Query}
		if settings.StatusPageControl {
			page.Pause = d.SetPause
		}
		go func() {
			if err := statuspage.Serve(ctx, settings.StatusPageListen, page, log); err != nil {
				log.Error("the status page is not served", logging.KeyError, err)
			}
		}()
	}

	ops, err := operator.NewPolicy(settings.OperatorGroup)
	if err != nil {
		log.Error("the operator group cannot pause", logging.KeyError, err)
	}
	go serveStatus(ctx, statusapi.SocketPath(stateDir), statusapi.Handler{
		Status: d.Query,
		Measurement: func(ctx context.Context, m statusapi.Measurement) error {
			return d.TakeMeasurement(ctx, m.Key, m.Profile)
		},
		Pause: d.SetPause, Operators: ops,
	}, log, statusapi.BindRetry)

	return d.Run(ctx)
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
