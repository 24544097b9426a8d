// SPDX-License-Identifier: Apache-2.0

// Package selftest is `macake selftest`: it picks the suite for this
// machine (pf and dummynet on macOS, or on Linux against the emulator
// binaries; tc on Linux), refuses while `macake watch` runs unless told,
// removes what an earlier, killed selftest left, runs every check with
// each scratch object recorded before it exists, and removes them all
// again, also when the run is interrupted (Ctrl-C, SIGTERM) or a check
// fails. `macake down` calls RemoveLeftovers for what a SIGKILL left.
//
// The checks themselves are in selftest/pfcheck and selftest/tccheck; the
// machinery that runs and reports them is selftest/check.
package selftest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/docsite"
	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/selftest/pfcheck"
	"github.com/macake/macake/selftest/scratch"
	"github.com/macake/macake/selftest/tccheck"
	"github.com/macake/macake/session"
	"github.com/macake/macake/state"
)

// cleanupTimeout bounds the removal of the scratch objects after an
// interruption: the tools answer in milliseconds.
const cleanupTimeout = 30 * time.Second

// Options configure one selftest.
type Options struct {
	// StateDir holds the scratch record and the selftest's lock.
	StateDir string
	// Settings are the daemon settings: the anchor and pipe range macake
	// owns, which the scratch objects stay clear of.
	Settings settings.Daemon
	// Getenv reads MACAKE_BACKEND, the tool paths and PFDN_EMU_STATE;
	// nil is os.Getenv.
	Getenv func(string) string
	// Force runs even while `macake watch` runs.
	Force bool
	// Quick skips the shaping measurement.
	Quick bool
	// Version is macake's version, for the report.
	Version string
	// Progress, if set, is called with the report's header filled in
	// before the first check, and with each check's result as it ends.
	Started  func(r *check.Report, idWidth int)
	Progress func(check.Result)
	// SkipOwnershipCheck is set for a run by a user other than root
	// (tests), as for the state lock.
	SkipOwnershipCheck bool
}

func (o Options) getenv(k string) string {
	if o.Getenv == nil {
		return os.Getenv(k)
	}
	return o.Getenv(k)
}

// WatchRunningError is the refusal to run while `macake watch` runs.
type WatchRunningError struct{ PID int }

// Error says why and what to do.
func (e *WatchRunningError) Error() string {
	return fmt.Sprintf("macake watch (pid %d) is running; the selftest touches only scratch objects, but it enables pf and shapes loopback traffic for a few seconds while watch keeps the shaping: stop watch first, or run with --force", e.PID)
}

// suite is what a backend's checks provide.
type suite interface {
	Checks() []check.Check
	Real() *check.Side
	Expected() *check.Side
	Setup() []string
	Describe() (real, expected string)
	Close(ctx context.Context) (done []string, errs []error)
}

// Run runs the selftest for this machine and returns its report. The error
// is for a selftest that could not start (watch running, another selftest,
// tools missing: errors.Is backend.ErrUnavailable, leftovers that would
// not go); differences are in the report.
func Run(ctx context.Context, o Options) (*check.Report, error) {
	if pid, holder, held, err := state.Holder(o.StateDir); err == nil && held && holder == state.HolderWatch && !o.Force {
		return nil, &WatchRunningError{PID: pid}
	}
	ses, err := session.Open(ctx, session.Options{
		StateDir: o.StateDir, Settings: &o.Settings, NoState: true, NoBackend: true, Getenv: o.getenv,
		Lock: &state.LockOptions{Name: state.SelftestLockName, Wait: time.Second, Holder: "selftest", SkipOwnershipCheck: o.SkipOwnershipCheck},
	})
	if err != nil {
		if le, ok := errors.AsType[*state.LockedError](err); ok {
			return nil, fmt.Errorf("another macake selftest (pid %d) is running; wait for it to finish", le.PID)
		}
		return nil, err
	}
	defer ses.Close()
	name := ses.BackendName

	r := &check.Report{Started: time.Now(), Host: host(o)}
	if done, err := removeLeftovers(ctx, o); err != nil {
		return nil, err
	} else if done != "" {
		r.Setup = append(r.Setup, done)
	}
	led, err := scratch.Open(o.StateDir, name, r.Started)
	if err != nil {
		return nil, err
	}
	var s suite
	switch name {
	case "pf":
		r.Suite, r.Labels = "pf/dummynet", docsite.Page("DUMMYNET.md", "12-the--labels")
		s, err = newPF(ctx, o, led)
	case "tc":
		r.Suite, r.Labels = "tc", docsite.Page("LINUX.md", "checking-a-kernel-macake-selftest")
		s, err = tccheck.New(ctx, tccheck.Options{Runner: execrun.Exec{}, Tools: tc.ToolsFromEnv(o.getenv), Ledger: led, SkipMeasure: o.Quick})
	}
	if err != nil {
		// New creates nothing but the record (and on tc, maybe the
		// namespace): remove what it names.
		if _, errs := remove(context.WithoutCancel(ctx), o, led.Record()); len(errs) == 0 {
			led.Close()
		}
		return nil, err
	}
	r.Real, r.Expected = s.Describe()
	r.Setup = append(r.Setup, s.Setup()...)
	checks := s.Checks()
	if o.Started != nil {
		o.Started(r, check.IDWidth(checks))
	}
	r.Results, r.Interrupted = check.Run(ctx, checks, s.Real(), s.Expected(), o.Progress)

	// However the checks ended, the scratch objects go, with a context of
	// their own: a Ctrl-C must not stop the cleanup it asked for.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	done, errs := s.Close(cctx)
	r.Cleanup = done
	for _, e := range errs {
		r.CleanupErrors = append(r.CleanupErrors, e.Error())
	}
	if len(errs) == 0 {
		if err := led.Close(); err != nil {
			r.CleanupErrors = append(r.CleanupErrors, err.Error())
		}
	} else {
		r.CleanupErrors = append(r.CleanupErrors, "the scratch record "+scratch.Path(o.StateDir)+" is kept: the next 'macake selftest' or 'macake down' removes what it names")
	}
	r.Summary = check.Summarize(r.Results)
	r.Took = check.Duration(time.Since(r.Started))
	return r, nil
}

// newPF builds the pf suite: the real tools from the settings and the
// environment; the emulator binaries when PFDN_EMU_STATE names their
// state (there is then no packet path to measure).
func newPF(ctx context.Context, o Options, led *scratch.Ledger) (suite, error) {
	opts := pfdn.OptionsFor(session.BackendSettings(o.Settings), o.getenv)
	if _, err := backend.Open(backend.Config{Settings: session.BackendSettings(o.Settings), Getenv: o.getenv, GOOS: "darwin"}); err != nil {
		return nil, err // the tools are missing: ErrUnavailable, with the paths
	}
	po := pfcheck.Options{
		Runner: execrun.Exec{Timeout: opts.CommandTimeout}, Pfctl: opts.Pfctl, Dnctl: opts.Dnctl,
		Ledger: led, Avoid: opts.Pipes, SkipMeasure: o.Quick,
	}
	switch state := o.getenv(pfdntest.EnvState); {
	case state != "":
		po.Traffic = pfcheck.EmulatorFileTraffic(state)
		po.NoPacketPath = fmt.Sprintf("the real side is the pfdntest emulator (%s is set), which has no packets to time: dummynet's shaping is measured on a Mac", pfdntest.EnvState)
	case runtime.GOOS != "darwin":
		po.NoPacketPath = fmt.Sprintf("needs macOS's lo0 and dummynet (this is %s)", runtime.GOOS)
	}
	return pfcheck.New(ctx, po)
}

// RemoveLeftovers removes what a killed selftest left (the scratch record
// names it), unless a selftest is running now; `macake down` calls it. It
// returns one line saying what it removed, "" when there was nothing.
func RemoveLeftovers(ctx context.Context, o Options) (string, error) {
	if pid, _, held, err := state.HolderOf(o.StateDir, state.SelftestLockName); err == nil && held {
		return fmt.Sprintf("a macake selftest (pid %d) is running; its scratch objects are left to it", pid), nil
	}
	return removeLeftovers(ctx, o)
}

// DescribeLeftovers says what RemoveLeftovers would remove, "" for
// nothing (a dry run of `macake down`).
func DescribeLeftovers(o Options) (string, error) {
	rec, ok, err := scratch.Load(o.StateDir)
	if err != nil || !ok || rec.Empty() {
		return "", err
	}
	var what []string
	if rec.Anchor != "" {
		what = append(what, "anchor "+rec.Anchor)
	}
	for _, n := range rec.Pipes {
		what = append(what, fmt.Sprintf("pipe %d", n))
	}
	for _, t := range rec.Tokens {
		what = append(what, "pf reference "+t)
	}
	if rec.Netns != "" { // it stands for its peer too
		what = append(what, "network namespaces "+rec.Netns+" and "+tccheck.Peer(rec.Netns))
	}
	return fmt.Sprintf("a selftest (pid %d, %s) recorded scratch objects; those still there would be removed: %s", rec.PID, rec.Started.Format(time.DateTime), strings.Join(what, ", ")), nil
}

func removeLeftovers(ctx context.Context, o Options) (string, error) {
	rec, ok, err := scratch.Load(o.StateDir)
	if err != nil || !ok {
		return "", err
	}
	done, errs := remove(ctx, o, rec)
	if len(errs) > 0 {
		return "", fmt.Errorf("removing the scratch objects of an earlier selftest (pid %d, %s): %w; fix the cause and run 'macake down' or the selftest again",
			rec.PID, rec.Started.Format(time.DateTime), errors.Join(errs...))
	}
	if err := scratch.Remove(o.StateDir); err != nil {
		return "", err
	}
	if len(done) == 0 {
		return "", nil
	}
	return fmt.Sprintf("removed what an earlier selftest (pid %d, %s) left: %s", rec.PID, rec.Started.Format(time.DateTime), strings.Join(done, ", ")), nil
}

// remove removes the objects a record names, with the tools of its backend.
func remove(ctx context.Context, o Options, rec scratch.Record) ([]string, []error) {
	switch rec.Backend {
	case "pf":
		opts := pfdn.OptionsFor(session.BackendSettings(o.Settings), o.getenv)
		return pfcheck.RemoveScratch(ctx, execrun.Exec{Timeout: opts.CommandTimeout}, opts.Pfctl, opts.Dnctl, rec, time.Now())
	case "tc":
		return tccheck.RemoveScratch(ctx, execrun.Exec{}, tc.ToolsFromEnv(o.getenv), rec)
	}
	return nil, []error{fmt.Errorf("the scratch record %s names backend %q, which this macake does not know", scratch.Path(o.StateDir), rec.Backend)}
}

// host describes this machine for the report.
func host(o Options) check.Host {
	h := check.Host{OS: runtime.GOOS, Arch: runtime.GOARCH, Macake: o.Version, Go: runtime.Version()}
	var argv []string
	switch runtime.GOOS {
	case "darwin":
		argv = []string{"/usr/bin/sw_vers", "-productVersion"}
	case "linux":
		argv = []string{"uname", "-r"}
	}
	if argv != nil {
		if res, err := (execrun.Exec{Timeout: 5 * time.Second}).Run(context.Background(), execrun.Command{Argv: argv}); err == nil && res.ExitCode == 0 {
			h.Version = strings.TrimSpace(string(res.Stdout))
		}
	}
	return h
}

// Unavailable reports whether err means this machine cannot be tested at
// all (the tools are missing).
func Unavailable(err error) bool { return errors.Is(err, backend.ErrUnavailable) }
