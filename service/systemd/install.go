// SPDX-License-Identifier: Apache-2.0

package systemd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/macake/macake/diag"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/service"
)

func init() {
	service.Register("linux", func(h service.Host) service.Manager { return Manager{Host: h} })
}

// Systemctl is systemd's tool, found on PATH (/usr/bin or /bin).
const Systemctl = "systemctl"

// BootedMarker exists only while systemd is the running init (what
// sd_booted(3) checks): without it there is no systemd to ask.
const BootedMarker = "/run/systemd/system"

// Manager is systemd as a service.Manager: the system unit for the
// daemon, a user unit in the user's own systemd for the agent.
type Manager struct {
	Host service.Host
}

// job is one unit: its name, file and owner, whose manager runs it, and
// what the unit says.
type job struct {
	name, path string
	// user: the user's manager (systemctl --user), not the system's.
	user  bool
	unit  []byte
	owner service.Owner
	// dirs are the directories the job needs before it starts: the
	// user's unit directory, a state directory given as ReadWritePaths=.
	dirs []dir
}

type dir struct {
	path  string
	perm  fs.FileMode
	owner service.Owner
}

func (j job) systemctl(args ...string) []string {
	argv := []string{Systemctl}
	if j.user {
		argv = append(argv, "--user")
	}
	return append(argv, args...)
}

// daemonJob is the system unit running p (p's zero value: enough to
// remove it).
func daemonJob(p service.Program) (job, error) {
	j := job{name: UnitName, path: UnitPath, owner: service.RootRoot}
	if p == (service.Program{}) {
		return j, nil
	}
	var err error
	if j.unit, err = WatchUnit(p); err != nil {
		return j, err
	}
	if !strings.HasPrefix(p.StateDir, stateBase) {
		// ReadWritePaths= makes the unit fail to start when the
		// directory is missing; StateDirectory= creates its own.
		j.dirs = append(j.dirs, dir{path: p.StateDir, perm: stateDirPerm, owner: service.RootRoot})
	}
	return j, nil
}

// agentJob is the user unit running p in home (p's zero value: enough to
// remove it).
func agentJob(p service.Program, home string) (job, error) {
	if !filepath.IsAbs(home) {
		return job{}, fmt.Errorf("home directory %q is not absolute", home)
	}
	j := job{name: MonitorUnitName, path: MonitorUnitPath(home), user: true, owner: service.CurrentUser,
		dirs: []dir{{path: filepath.Dir(MonitorUnitPath(home)), perm: 0o755, owner: service.CurrentUser}}}
	if p == (service.Program{}) {
		return j, nil
	}
	var err error
	j.unit, err = MonitorUnit(p)
	return j, err
}

// observation is what systemd says of a job, beyond what every manager
// reports: whether it is masked, and whether systemd holds an older
// reading of its file.
type observation struct {
	service.Observation
	masked, needReload bool
}

// planInstall returns the steps that make obs match j: nothing when the
// same unit is installed, enabled and running (unless restart is asked
// for). A written unit is read with daemon-reload, and restarts a running
// job, since systemd reads a unit only then. Pure.
func planInstall(j job, obs observation, restart bool) []service.Step {
	var steps []service.Step
	for _, d := range j.dirs {
		for _, missing := range obs.MissingDirs {
			if missing == d.path {
				steps = append(steps, service.Mkdir(d.path, d.perm, d.owner, "missing"))
			}
		}
	}
	written := obs.File != service.FileSame
	if written {
		reason := "not installed"
		if obs.File == service.FileDifferent {
			reason = "differs from the rendered unit"
		}
		steps = append(steps, service.Write(j.path, j.unit, 0o644, j.owner, reason))
	}
	if obs.NoSession {
		// No user manager to tell: it reads the unit when it starts.
		return steps
	}
	if written || obs.needReload {
		steps = append(steps, service.Run("systemd reads unit files only when told to", j.systemctl("daemon-reload")...))
	}
	if obs.masked {
		steps = append(steps, service.Run("clear a mask, which keeps it from starting at all", j.systemctl("unmask", j.name)...))
	}
	if !obs.Loaded {
		when := "at every boot"
		if j.user {
			when = "at every login"
		}
		steps = append(steps, service.Run("start it "+when, j.systemctl("enable", j.name)...))
	}
	switch {
	case !obs.Running:
		steps = append(steps, service.Run("start it now", j.systemctl("start", j.name)...))
	case written:
		steps = append(steps, service.Run("it runs the old unit; restart it with the new one", j.systemctl("restart", j.name)...))
	case restart:
		steps = append(steps, service.Run("restart requested (--restart)", j.systemctl("restart", j.name)...))
	}
	return steps
}

// planUninstall returns the steps that remove j: stop and disable it while
// systemd has it, then its file, which systemd is then told about. Pure.
func planUninstall(j job, obs observation) []service.Step {
	var steps []service.Step
	if !obs.NoSession && (obs.Loaded || obs.Running) {
		steps = append(steps, service.Run("stop it, and keep it from starting again", j.systemctl("disable", "--now", j.name)...))
	}
	if obs.File != service.FileMissing {
		steps = append(steps, service.Remove(j.path, "so systemd does not find it again"))
		if !obs.NoSession {
			steps = append(steps, service.Run("forget the removed unit", j.systemctl("daemon-reload")...))
		}
	}
	return steps
}

// run runs argv and returns its stdout; a failure carries systemctl's
// message.
func (m Manager) run(ctx context.Context, argv []string) (execrun.Result, error) {
	cmd := execrun.Command{Argv: argv}
	res, err := m.Host.Runner.Run(ctx, cmd)
	if err != nil {
		return res, fmt.Errorf("running %s: %w", Systemctl, err)
	}
	return res, nil
}

func failure(argv []string, res execrun.Result) error {
	return &execrun.Error{Argv: argv, ExitCode: res.ExitCode, Stderr: bytes.TrimSpace(append(res.Stderr, res.Stdout...))}
}

// noBus reports systemctl's answer when it cannot reach the manager: for
// a user, no systemd of theirs runs (an ssh session without one).
func noBus(res execrun.Result) bool {
	return len(bytes.TrimSpace(res.Stdout)) == 0 && bytes.Contains(res.Stderr, []byte("Failed to connect to"))
}

// word is the first word systemctl printed: is-enabled's and is-active's
// answer, whatever their exit status.
func word(res execrun.Result) string {
	f := strings.Fields(string(res.Stdout))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// observe reads j's file and directories and what systemd says of it,
// changing nothing.
func (m Manager) observe(ctx context.Context, j job) (observation, error) {
	var obs observation
	for _, d := range j.dirs {
		if _, err := m.Host.Files.Stat(d.path); errors.Is(err, fs.ErrNotExist) {
			obs.MissingDirs = append(obs.MissingDirs, d.path)
		} else if err != nil {
			return obs, fmt.Errorf("checking %s: %w", d.path, err)
		}
	}
	var err error
	if obs.File, err = service.FileStateOf(m.Host.Files, j.path, j.unit, 0o644, j.owner); err != nil {
		return obs, err
	}
	argv := j.systemctl("is-enabled", j.name)
	res, err := m.run(ctx, argv)
	if err != nil {
		return obs, err
	}
	switch state := word(res); {
	case j.user && noBus(res):
		obs.NoSession = true
		return obs, nil
	case state == "enabled", state == "enabled-runtime", state == "alias", state == "indirect":
		obs.Loaded = true
	case state == "masked", state == "masked-runtime":
		obs.masked = true
	case state == "" && (obs.File == service.FileMissing || bytes.Contains(res.Stderr, []byte("No such file"))):
		// An unknown unit: systemd before 250 prints only an error
		// ("Failed to get unit file state … No such file or
		// directory"), later ones "not-found".
	case state == "":
		return obs, fmt.Errorf("asking systemd whether %s is enabled: %w", j.name, failure(argv, res))
	}
	argv = j.systemctl("is-active", j.name)
	if res, err = m.run(ctx, argv); err != nil {
		return obs, err
	}
	switch state := word(res); state {
	case "active", "activating", "reloading", "refreshing":
		obs.Running = true
	case "":
		return obs, fmt.Errorf("asking systemd whether %s runs: %w", j.name, failure(argv, res))
	}
	if obs.File != service.FileMissing {
		argv = j.systemctl("show", "--property=NeedDaemonReload", "--value", j.name)
		if res, err = m.run(ctx, argv); err != nil {
			return obs, err
		}
		obs.needReload = word(res) == "yes"
	}
	return obs, nil
}

// apply carries out steps in order and stops at the first failure, which
// it returns with systemctl's exit status and message.
func (m Manager) apply(ctx context.Context, steps []service.Step, done func(service.Step)) error {
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		if s.Kind == service.StepRun {
			var res execrun.Result
			if res, err = m.run(ctx, s.Argv); err == nil && res.ExitCode != 0 {
				err = failure(s.Argv, res)
			}
		} else {
			err = service.ApplyFile(m.Host.Files, s)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		if done != nil {
			done(s)
		}
	}
	return nil
}

// report starts the report of j.
func report(j job, dryRun bool) *service.Report {
	target := j.name
	if j.user {
		target = "user/" + j.name
	}
	r := service.NewReport("systemd", j.name, target, j.path, dryRun)
	kind, journal, attrs := "systemd unit", "journalctl -u "+j.name, "root:root 0644"
	if j.user {
		kind, journal, attrs = "systemd user unit", "journalctl --user -u "+j.name, "0644"
	}
	r.LogCommand = journal + " -f"
	r.Text = service.Text{Kind: kind, FileKind: "unit", FileAttrs: attrs,
		Inspect: strings.Join(j.systemctl("status", j.name), " "), Kept: "its log stays in the journal (" + journal + ")", Agent: j.user}
	return r
}

// Available implements service.Manager: systemd must be the running init.
func (m Manager) Available() error {
	j, _ := daemonJob(service.Program{})
	return m.booted(j)
}

// booted checks that systemd runs this machine; an *UnavailableError says
// what to do instead.
func (m Manager) booted(j job) error {
	if _, err := m.Host.Files.Stat(BootedMarker); err == nil {
		return nil
	}
	how := "run `macake watch` under this system's own init instead (it stays in the foreground and logs to stderr)"
	if j.user {
		how = "run `macake monitor` some other way"
	}
	return &service.UnavailableError{Err: fmt.Errorf("systemd is not running on this machine (no %s), so there is no systemd to install %s into; %s", BootedMarker, j.name, how)}
}

// look observes j, or, where that cannot be done, says why: a real run
// stops there; a dry run shows the steps on a machine in the fallback
// situation, "with systemd …".
func (m Manager) look(ctx context.Context, j job, dryRun bool, rep *service.Report, fallback observation, situation string, p service.Progress) (observation, error) {
	err := m.booted(j)
	if err == nil {
		var obs observation
		if obs, err = m.observe(ctx, j); err == nil {
			return obs, nil
		}
	}
	if !dryRun {
		return fallback, err
	}
	msg := fmt.Sprintf("%v; showing the steps on a machine with systemd %s", err, situation)
	rep.Warnings = append(rep.Warnings, diag.Diagnostic{Message: msg})
	p.Warn(msg)
	return fallback, nil
}

// Install implements service.Manager.
func (m Manager) Install(ctx context.Context, req service.InstallRequest, p service.Progress) (*service.Report, error) {
	var j job
	var err error
	args := req.Program.Args("watch")
	if req.Agent {
		j, err = agentJob(req.Program, req.Home)
		args = req.Program.Args("monitor")
	} else {
		j, err = daemonJob(req.Program)
	}
	if err != nil {
		return nil, &service.RequestError{Err: err}
	}
	rep := report(j, req.DryRun)
	rep.ProgramArguments, rep.Warnings = args, diag.Messages(req.Warnings)
	fresh := observation{Observation: service.Observation{File: service.FileMissing}}
	for _, d := range j.dirs {
		fresh.MissingDirs = append(fresh.MissingDirs, d.path)
	}
	obs, err := m.look(ctx, j, req.DryRun, rep, fresh, "that does not have the unit yet", p)
	if err != nil {
		return nil, err
	}
	rep.Observed = &obs.Observation
	steps := planInstall(j, obs, req.Restart)
	rep.SetSteps(steps)
	if obs.NoSession {
		note := fmt.Sprintf("no systemd of yours runs now (%s cannot reach it): the unit is installed, and `%s` in a login session starts it",
			strings.Join(j.systemctl(), " "), strings.Join(j.systemctl("enable", "--now", j.name), " "))
		rep.Notes = append(rep.Notes, note)
		p.Say(note)
	}
	if req.DryRun {
		rep.Content = string(j.unit)
		return rep, nil
	}
	if err := m.apply(ctx, steps, p.Done); err != nil {
		rep.Error = diag.OfPtr(err)
		return rep, err
	}
	p.Finished(rep)
	return rep, nil
}

// Uninstall implements service.Manager: it stops and disables the unit
// and removes its file (the journal keeps the log).
func (m Manager) Uninstall(ctx context.Context, req service.UninstallRequest, p service.Progress) (*service.Report, error) {
	j, err := daemonJob(service.Program{})
	if req.Agent {
		j, err = agentJob(service.Program{}, req.Home)
	}
	if err != nil {
		return nil, &service.RequestError{Err: err}
	}
	rep := report(j, req.DryRun)
	installed := observation{Observation: service.Observation{File: service.FileDifferent, Loaded: true, Running: true}}
	obs, err := m.look(ctx, j, req.DryRun, rep, installed, "that has the unit installed and running", p)
	if err != nil {
		return nil, err
	}
	rep.Observed = &obs.Observation
	steps := planUninstall(j, obs)
	rep.SetSteps(steps)
	if req.DryRun {
		return rep, nil
	}
	if err := m.apply(ctx, steps, p.Done); err != nil {
		rep.Error = diag.OfPtr(err)
		return rep, err
	}
	return service.FinishUninstall(rep, req, p)
}
