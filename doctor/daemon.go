// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/service"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/systemd"
	"github.com/macake/macake/state"
)

// watchFacts is whether `macake watch` runs and, when it answers on its
// socket, what it says about itself.
type watchFacts struct {
	state WatchState
	err   error
	// status is the daemon's answer on its socket; askErr says why there
	// is none.
	status *statusapi.Status
	askErr error
}

func (in *Inspection) watch(ctx context.Context) watchFacts {
	return in.watchOnce.get(func() watchFacts {
		var w watchFacts
		dir := in.config().stateDir
		if in.sys.AskWatch == nil {
			w.askErr = errors.New("no way to ask")
		} else if st, err := in.sys.AskWatch(ctx, dir); err != nil {
			w.askErr = err
		} else {
			w.status = &st
		}
		if in.sys.Watch == nil {
			w.err = errors.New("no way to tell")
		} else {
			w.state, w.err = in.sys.Watch.Watch(ctx, dir)
		}
		if w.status != nil {
			// The daemon itself answered: that beats reading its lock.
			w.state = WatchState{Running: true, PID: w.status.Daemon.PID, Holder: state.HolderWatch, Via: "its socket " + statusapi.SocketPath(dir)}
			w.err = nil
		}
		return w
	})
}

// now is the inspection's clock.
func (in *Inspection) now() time.Time {
	if in.sys.Now != nil {
		return in.sys.Now()
	}
	return time.Now()
}

// daemonLogs says where the daemon's logs are: its own log (macake.toml's
// log_file, else the one the LaunchDaemon passes), and on macOS the file
// launchd sends its standard output and error to, which holds what watch
// printed before its log was open (a bad macake.toml, a refused lock) and
// crash reports.
func (in *Inspection) daemonLogs() string {
	if in.sys.GOOS != "darwin" {
		return "journalctl -u macake-watch"
	}
	log := launchd.DaemonLogPath
	if f := in.config().policies.Settings.LogFile; f != "" {
		log = f
	}
	return log + " and " + launchd.DaemonStderrPath
}

func checkDaemonHealth(ctx context.Context, in *Inspection) report.Result {
	w := in.watch(ctx)
	if w.status != nil {
		return judgeDaemonStatus(*w.status, in.now(), in.daemonLogs())
	}
	socket := statusapi.SocketPath(in.config().stateDir)
	switch {
	case errors.Is(w.askErr, statusapi.ErrPermission):
		return needsRoot(fmt.Sprintf("this user may not ask macake watch over %s", socket), "how macake watch is doing")
	case w.state.Running:
		restart := "sudo launchctl kickstart -k " + launchd.Daemon().ServiceTarget()
		if in.sys.GOOS != "darwin" {
			restart = "sudo systemctl restart macake-watch"
		}
		why := ""
		if !errors.Is(w.askErr, statusapi.ErrNotRunning) {
			why = fmt.Sprintf(" (%v)", w.askErr)
		}
		return problem("see "+in.daemonLogs()+"; if it stays so, restart it: "+restart,
			"macake watch (pid %d) holds the state lock but does not answer on %s%s: it is starting, or stuck", w.state.PID, socket, why)
	}
	return skipped("macake watch is not running (see above)")
}

// judgeDaemonStatus judges what the daemon says about itself: its last
// reconcile, the policy file errors it keeps the last good version for,
// links it cannot shape as their policy says, and its other problems.
func judgeDaemonStatus(st statusapi.Status, now time.Time, logs string) report.Result {
	who := fmt.Sprintf("pid %d", st.Daemon.PID)
	if st.Daemon.Version != "" {
		who += ", version " + st.Daemon.Version
	}
	if !st.Daemon.StartedAt.IsZero() {
		who += ", up " + roundAge(now.Sub(st.Daemon.StartedAt))
	}
	res := ok("macake watch (%s) answers", who)
	raise := func(to report.Status, fix string) {
		res.Status = max(res.Status, to)
		if fix != "" && !strings.Contains(res.Fix, fix) {
			res.Fix = strings.TrimPrefix(res.Fix+"; "+fix, "; ")
		}
	}
	switch la := st.LastApply; {
	case la == nil:
		res.Message += "; it has not reconciled yet (it waits for the network's link facts)"
		raise(report.Info, "")
	case la.Result == "failed":
		res.Message += fmt.Sprintf("; its last reconcile (%s, %s ago) failed", la.Trigger, roundAge(now.Sub(la.At)))
		if la.Error != nil {
			res.Message += ": " + la.Error.String()
		}
		raise(report.Problem, "see "+logs+"; watch retries by itself")
	default:
		what := "no changes"
		if la.Result != "no_changes" {
			what = fmt.Sprintf("%d created, %d updated, %d removed", la.Created, la.Updated, la.Removed)
		}
		res.Message += fmt.Sprintf("; its last reconcile (%s, %s ago): %s", la.Trigger, roundAge(now.Sub(la.At)), what)
	}
	if n := len(st.ConfigErrors); n > 0 {
		res.Message += fmt.Sprintf("; %s in force", english.Plural(n, "policy file error"))
		for _, ce := range st.ConfigErrors {
			kept := "nothing of it is in force"
			if ce.Kept == "last_good" {
				kept = "its last good version stays in force"
			}
			res.Details = append(res.Details, fmt.Sprintf("%s (%s)", ce.Diagnostic, kept))
		}
		raise(report.Warning, "fix the files (macake validate lists every problem); watch applies a fix within a second")
	}
	others := 0
	for _, l := range st.Links {
		if l.Error != nil {
			res.Details = append(res.Details, fmt.Sprintf("link %s: %s", l.Name, l.Error.Message))
			others++
		}
	}
	for _, p := range st.Problems {
		res.Details = append(res.Details, p.String())
		others++
	}
	if others > 0 {
		res.Message += fmt.Sprintf("; %s keep shaping from being what the files say", english.Plural(others, "problem"))
		raise(report.Warning, "see macake status")
	}
	return res
}

// checkBounds passes on what the daemon's history says of the links'
// bounds (statusapi.Advice): a direction that spent most of its loaded
// time in the last hour pinned at max or cut to min, with the edit to
// make. It is advice, not a fault: shaping works, only not as well as it
// could, so it is information with a fix, and doctor never edits a file.
func checkBounds(ctx context.Context, in *Inspection) report.Result {
	w := in.watch(ctx)
	if w.status == nil {
		return skipped("macake watch did not answer (see above)")
	}
	return judgeBounds(*w.status)
}

// judgeBounds is checkBounds' verdict on a status.
func judgeBounds(st statusapi.Status) report.Result {
	var advice []statusapi.Advice
	var links []string
	for _, l := range st.Links {
		for _, a := range l.Advice {
			advice = append(advice, a)
			links = append(links, l.Name)
		}
	}
	if len(advice) == 0 {
		return ok("no link sat at its max or its min for most of its loaded time in the last hour")
	}
	r := info("%s: %s", english.Plural(len(advice), "bound")+" to change", advice[0].Message)
	for i, a := range advice {
		r.Details = append(r.Details, fmt.Sprintf("link %s: %s; in %s set %s", links[i], a.Message, a.File, a.Edit))
	}
	r.Fix = "edit the policy files as each line says (macake never changes them by itself); watch applies the edit within a second"
	return r
}

// roundAge renders a duration for people, to two units: "12s", "4m",
// "4m10s", "3h", "2h5m", "3d4h".
func roundAge(d time.Duration) string {
	secs := int64(max(d, 0).Round(time.Second) / time.Second)
	two := func(big int64, bigUnit string, small int64, smallUnit string) string {
		if small == 0 {
			return fmt.Sprintf("%d%s", big, bigUnit)
		}
		return fmt.Sprintf("%d%s%d%s", big, bigUnit, small, smallUnit)
	}
	switch {
	case secs < 60:
		return fmt.Sprintf("%ds", secs)
	case secs < 3600:
		return two(secs/60, "m", secs%60, "s")
	case secs < 48*3600:
		return two(secs/3600, "h", secs%3600/60, "m")
	}
	return two(secs/86400, "d", secs%86400/3600, "h")
}

// serviceFacts is the installed service definition.
type serviceFacts struct {
	path string
	// data is the file; nil when it is missing.
	data []byte
	err  error
	// prog is what it runs, when it is one this macake could have written.
	prog    service.Program
	progErr error
	// same tells whether the file is byte for byte (and, for the plist,
	// owner and mode) what this macake renders for prog.
	same bool
	// loaded is launchd's view (macOS).
	loaded bool
}

func (in *Inspection) service(ctx context.Context) serviceFacts {
	if in.sys.GOOS == "darwin" {
		return in.launchdService(ctx)
	}
	return in.systemdService()
}

// serviceFile reads the service definition at path and, when it could,
// what it runs (programOf).
func (in *Inspection) serviceFile(path string, programOf func([]byte) (service.Program, error)) serviceFacts {
	s := serviceFacts{path: path}
	s.data, s.err = in.sys.FS.ReadFile(s.path)
	if s.err == nil {
		s.prog, s.progErr = programOf(s.data)
	}
	return s
}

func (in *Inspection) launchdService(ctx context.Context) serviceFacts {
	s := in.serviceFile(launchd.DaemonPlistPath, launchd.ProgramOfPlist)
	if s.err != nil || s.progErr != nil {
		return s
	}
	job, err := launchd.DaemonJob(s.prog)
	if err != nil {
		s.progErr = err
		return s
	}
	ins := &launchd.Installer{Files: readOnlyFiles{in.sys.FS}, Runner: in.sys.Launchctl}
	obs, err := ins.Observe(ctx, job)
	if err != nil {
		s.err = err
		return s
	}
	s.same, s.loaded = obs.File == service.FileSame, obs.Loaded
	return s
}

func (in *Inspection) systemdService() serviceFacts {
	s := in.serviceFile(systemd.UnitPath, systemd.ProgramOfUnit)
	if s.err != nil || s.progErr != nil {
		return s
	}
	want, err := systemd.WatchUnit(s.prog)
	s.same = err == nil && string(want) == string(s.data)
	return s
}

// readOnlyFiles lets launchd.Installer.Observe read through FS; doctor
// never writes, so the writing methods refuse.
type readOnlyFiles struct{ FS }

var errReadOnly = errors.New("doctor does not change files")

func (readOnlyFiles) WriteFile(string, []byte, fs.FileMode, service.Owner) error { return errReadOnly }
func (readOnlyFiles) MkdirAll(string, fs.FileMode, service.Owner) error          { return errReadOnly }
func (readOnlyFiles) Remove(string) error                                        { return errReadOnly }

func checkDaemonInstalled(ctx context.Context, in *Inspection) report.Result {
	s := in.service(ctx)
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	return judgeService(s, in.sys.GOOS, in.sys.FS, in.watch(ctx).state, abs(in.sys.ConfigDir), in.config().stateDir, in.sys.invocation())
}

// installFix is how to install the service (launchd or systemd alike),
// with the directories this run checked.
func installFix(inv config.Invocation) string {
	return inv.Command(true, "install-daemon")
}

// judgeService checks that the service that keeps macake watch running is
// installed, runs an existing macake with the directories this run
// checked, and is what this macake would write.
func judgeService(s serviceFacts, goos string, files FS, w WatchState, configDir, stateDir string, inv config.Invocation) report.Result {
	kind := "LaunchDaemon"
	if goos != "darwin" {
		kind = "systemd unit"
	}
	switch {
	case errors.Is(s.err, fs.ErrNotExist) && w.Running:
		return info("no %s at %s, but macake watch runs (pid %d), started some other way", kind, s.path, w.PID)
	case errors.Is(s.err, fs.ErrNotExist):
		return warn(installFix(inv),
			"no %s at %s: nothing keeps macake watch running, so drift is not repaired and rates are not steered", kind, s.path)
	case s.err != nil:
		return problem("check the file's permissions", "cannot read %s: %v", s.path, s.err)
	case s.progErr != nil:
		return warn(installFix(inv)+" rewrites it", "%s was not written by this macake: %v", s.path, s.progErr)
	}
	if fi, err := files.Stat(s.prog.Binary); err != nil || fi.IsDir || fi.Mode.Perm()&0o111 == 0 {
		return problem(installFix(inv)+" (run it with the installed macake, or pass --binary PATH)",
			"%s runs %s, which is not an executable file, so the daemon cannot start", s.path, s.prog.Binary)
	}
	runs := fmt.Sprintf("%s runs %s watch", s.path, s.prog.Binary)
	if s.prog.ConfigDir != configDir || s.prog.StateDir != stateDir {
		return warn(fmt.Sprintf("check the daemon's directories with: macake --config-dir %s --state-dir %s doctor", s.prog.ConfigDir, s.prog.StateDir),
			"%s with --config-dir %s --state-dir %s, but this run checked %s and %s", runs, s.prog.ConfigDir, s.prog.StateDir, configDir, stateDir)
	}
	if !s.same {
		what := "its content"
		if goos == "darwin" {
			what = "its content, owner (root:wheel) or mode (0644)"
		}
		return warn(installFix(inv)+" rewrites it (and restarts the daemon)",
			"%s, but %s differs from what this macake writes (another version, or edited by hand)", runs, what)
	}
	return ok("%s", runs)
}

func checkDaemonRunning(ctx context.Context, in *Inspection) report.Result {
	s := in.service(ctx)
	w := in.watch(ctx)
	if in.sys.GOOS != "darwin" {
		return judgeWatchLinux(s, w)
	}
	if s.err != nil || s.progErr != nil {
		if w.state.Running {
			return ok("macake watch runs (pid %d, found through %s)", w.state.PID, w.state.Via)
		}
		return skipped("the LaunchDaemon is missing or not macake's (see above)")
	}
	if !s.loaded {
		return problem("sudo launchctl bootstrap system "+launchd.DaemonPlistPath+" (or sudo macake install-daemon)",
			"%s is installed but not loaded: launchd does not run it", launchd.DaemonLabel)
	}
	res, err := in.sys.Launchctl.Run(ctx, execrun.Command{Argv: []string{launchd.Launchctl, "print", launchd.Daemon().ServiceTarget()}})
	if err != nil {
		return warn("run `launchctl print "+launchd.Daemon().ServiceTarget()+"` by hand", "cannot ask launchd about %s: %v", launchd.DaemonLabel, err)
	}
	return judgeLaunchdPrint(string(res.Stdout), w)
}

var (
	lcState    = lazyregexp.New(`(?m)^\s*state = (.+)$`)
	lcPID      = lazyregexp.New(`(?m)^\s*pid = (\d+)$`)
	lcLastExit = lazyregexp.New(`(?m)^\s*last exit code = (.+)$`)
)

// judgeLaunchdPrint reads `launchctl print system/org.macake.watch`. Its
// format is not a stable interface, so only three well-known lines are
// used, and their absence is not an error.
func judgeLaunchdPrint(out string, w watchFacts) report.Result {
	state, pid, lastExit := "", "", ""
	if m := lcState.FindStringSubmatch(out); m != nil {
		state = strings.TrimSpace(m[1])
	}
	if m := lcPID.FindStringSubmatch(out); m != nil {
		pid = m[1]
	}
	if m := lcLastExit.FindStringSubmatch(out); m != nil {
		lastExit = strings.TrimSpace(m[1])
	}
	logHint := "see " + launchd.DaemonLogPath + " and " + launchd.DaemonStderrPath + " (what launchd caught before the log opened, and crashes)"
	switch {
	case state == "running":
		switch {
		case pid != "":
			return ok("launchd runs %s (pid %s)", launchd.DaemonLabel, pid)
		case w.state.Running:
			return ok("launchd runs %s (pid %d)", launchd.DaemonLabel, w.state.PID)
		}
		return ok("launchd runs %s", launchd.DaemonLabel)
	case state == "" && w.state.Running:
		return ok("launchd has %s loaded, and macake watch holds the state lock (pid %d)", launchd.DaemonLabel, w.state.PID)
	case state == "":
		return info("launchd has %s loaded; its state could not be read from `launchctl print`", launchd.DaemonLabel)
	}
	meaning := ""
	switch lastExit {
	case "78":
		meaning = " (78: the configuration is invalid; run macake validate)"
	case "77":
		meaning = " (77: it needs root)"
	case "69":
		meaning = " (69: pfctl/dnctl unavailable)"
	}
	msg := fmt.Sprintf("%s is loaded but %s", launchd.DaemonLabel, state)
	if lastExit != "" {
		msg += fmt.Sprintf("; last exit code %s%s", lastExit, meaning)
	}
	return problem(logHint+"; launchd retries it every "+strconv.Itoa(service.ThrottleInterval)+" s", "%s", msg)
}

// judgeWatchLinux judges whether macake watch runs on Linux, where the
// state lock tells (systemd's own view would need systemctl).
func judgeWatchLinux(s serviceFacts, w watchFacts) report.Result {
	installed := s.err == nil
	switch {
	case w.err != nil:
		return warn("check the state directory's permissions", "cannot tell whether macake watch runs: %v", w.err)
	case w.state.Running:
		return ok("macake watch runs (pid %d, found through %s)", w.state.PID, w.state.Via)
	case installed:
		r := problem("sudo systemctl enable --now "+systemd.UnitName+"; see journalctl -u "+systemd.UnitName, "%s is installed but macake watch is not running", filepath.Base(s.path))
		if w.state.PID > 0 {
			r = r.With(fmt.Sprintf("pid %d (a one-shot macake command) holds the state lock right now", w.state.PID))
		}
		return r
	}
	return skipped("no service is installed (see above)")
}
