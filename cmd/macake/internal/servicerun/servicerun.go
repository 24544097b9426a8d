// SPDX-License-Identifier: Apache-2.0

// Package servicerun is one run of install-daemon, install-agent and
// their uninstalls as the command line shows it: who may run it, the
// program the job runs, the service manager's steps with their progress
// on stderr, the report (text or --json) and each outcome's exit status.
// The steps themselves are package service's; package main parses the
// flags and calls it.
package servicerun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/service"
	"github.com/macake/macake/service/systemd"
)

// Env is what a run touches of the outside world, as package main's
// command line gives it.
type Env struct {
	Ctx            context.Context
	Stdout, Stderr io.Writer
	// EUID is the effective user id: the daemon's commands need root, the
	// agent's refuse it.
	EUID int
	// Home is $HOME, where an agent is installed.
	Home string
	// ConfigDir and StateDir are the directories the job runs macake
	// with.
	ConfigDir, StateDir string
	// Host is the machine: its system, files, tools and executable.
	Host service.Host
	// RequireRoot says, unless root, that the command needs root to
	// what, and returns false and the exit status.
	RequireRoot func(what string) (ok bool, code int)
	// Down runs `macake down`, its output on stdout, and returns its exit
	// status: uninstall-daemon removes the shaping the daemon left.
	Down func(stdout io.Writer) int
}

// InstallFlags are the flags of install-daemon and install-agent.
type InstallFlags struct {
	// Binary is the macake the job runs (default: this executable).
	Binary string
	// DryRun prints what would be written and run, changing nothing.
	DryRun bool
	// Restart restarts the job even when nothing changed.
	Restart bool
	// JSON prints one JSON document instead of text.
	JSON bool
	// SystemdUnit prints the systemd unit (for this machine or another)
	// instead of installing it.
	SystemdUnit bool
}

// run is a run of the command cmd, for the daemon or (agent) the agent.
type run struct {
	env   Env
	cmd   string
	agent bool
}

// Install installs (or, with DryRun, shows) the daemon's or the agent's
// service, or prints its systemd unit, and returns the exit status.
func Install(env Env, cmd string, agent bool, f InstallFlags) int {
	r := run{env: env, cmd: cmd, agent: agent}
	if agent && env.EUID == 0 && !f.SystemdUnit {
		fmt.Fprintf(env.Stderr, "macake %s: run this as the user who should own the agent, without sudo; as root it would install into root's home.\n", cmd)
		return exitcode.Usage
	}
	progress := r.progress()
	prog, warnings, err := service.ResolveProgram(env.Host, service.ProgramRequest{
		Binary: f.Binary, ConfigDir: env.ConfigDir, StateDir: env.StateDir, Agent: agent, Lenient: f.DryRun || f.SystemdUnit,
	}, progress)
	if err != nil {
		return r.failed(err)
	}
	if f.SystemdUnit {
		render := systemd.WatchUnit
		if agent {
			render = systemd.MonitorUnit
		}
		unit, err := render(prog)
		if err != nil {
			fmt.Fprintf(env.Stderr, "macake %s: %v\n", cmd, err)
			return exitcode.Usage
		}
		env.Stdout.Write(unit)
		return exitcode.OK
	}
	m, code := r.manager()
	if m == nil {
		return code
	}
	if !agent && !f.DryRun {
		if ok, code := env.RequireRoot("install the system service"); !ok {
			return code
		}
	}
	req := service.InstallRequest{Program: prog, Warnings: warnings, Agent: agent, UID: env.EUID, DryRun: f.DryRun, Restart: f.Restart}
	if agent {
		if req.Home, code = r.home(); code != exitcode.OK {
			return code
		}
	}
	rep, err := m.Install(env.Ctx, req, progress)
	if err != nil {
		code := r.failed(err)
		if f.JSON && rep != nil {
			r.printReport(rep)
		}
		return code
	}
	if f.JSON {
		r.printReport(rep)
		return exitcode.OK
	}
	rep.WriteInstall(env.Stdout, cmd)
	return exitcode.OK
}

// Uninstall removes (or, with dryRun, shows the steps that remove) the
// daemon's or the agent's service, then for the daemon runs down, and
// returns the exit status.
func Uninstall(env Env, cmd string, agent, dryRun, asJSON bool) int {
	r := run{env: env, cmd: cmd, agent: agent}
	if agent && env.EUID == 0 {
		fmt.Fprintf(env.Stderr, "macake %s: run this as the user who owns the agent, without sudo.\n", cmd)
		return exitcode.Usage
	}
	m, code := r.manager()
	if m == nil {
		return code
	}
	if !agent && !dryRun {
		if ok, code := env.RequireRoot("remove the system service"); !ok {
			return code
		}
	}
	req := service.UninstallRequest{Agent: agent, UID: env.EUID, DryRun: dryRun, Down: func() int {
		if asJSON {
			return env.Down(env.Stderr) // stdout is the report's
		}
		return env.Down(env.Stdout)
	}}
	if agent {
		if req.Home, code = r.home(); code != exitcode.OK {
			return code
		}
	}
	progress := r.progress()
	progress.Applied = func(rep *service.Report) { fmt.Fprintln(env.Stderr, rep.Uninstalled()) }
	rep, err := m.Uninstall(env.Ctx, req, progress)
	if rep == nil {
		return r.failed(err)
	}
	if dryRun && !asJSON {
		rep.WriteUninstallPlan(env.Stdout)
		return exitcode.OK
	}
	code = exitcode.OK
	var downErr *service.DownError
	switch {
	case errors.As(err, &downErr):
		fmt.Fprintf(env.Stderr, "macake %s: %s\n", cmd, rep.DownFailed(downErr.ExitCode))
		code = exitcode.Failure
	case err != nil:
		code = r.failed(err)
		if !agent {
			fmt.Fprintln(env.Stderr, "macake down was not run, since the daemon may still be running.")
		}
	}
	if asJSON {
		r.printReport(rep)
	}
	return code
}

// Installable returns the manager of the machine h when it has one to
// install into.
func Installable(h service.Host) (service.Manager, error) {
	m, err := service.For(h)
	if err == nil {
		err = m.Available()
	}
	return m, err
}

// printReport prints the --json document of the four commands.
func (r run) printReport(rep *service.Report) {
	out, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Fprintln(r.env.Stdout, string(out))
}

// progress prints what the library reports as it goes, on stderr.
func (r run) progress() service.Progress {
	return service.Progress{
		Warning: func(msg string) { fmt.Fprintf(r.env.Stderr, "warning: %s\n", msg) },
		Note:    func(msg string) { fmt.Fprintf(r.env.Stderr, "note: %s\n", msg) },
		Done:    func(s service.Step) { fmt.Fprintln(r.env.Stderr, service.StepLine(s, false)) },
	}
}

// failed prints err and returns its exit status: a request that cannot
// work is a usage error, a machine without a service manager
// unavailable, anything else a failure.
func (r run) failed(err error) int {
	fmt.Fprintf(r.env.Stderr, "macake %s: %v\n", r.cmd, err)
	switch {
	case errors.As(err, new(*service.RequestError)):
		return exitcode.Usage
	case errors.As(err, new(*service.UnavailableError)):
		return exitcode.Unavailable
	}
	return exitcode.Failure
}

// manager returns the manager of this machine, or prints why there is
// none and returns the exit status.
func (r run) manager() (service.Manager, int) {
	m, err := service.For(r.env.Host)
	if err != nil {
		return nil, r.failed(err)
	}
	return m, exitcode.OK
}

// home is the agent's home directory, $HOME, which must be absolute.
func (r run) home() (string, int) {
	if r.env.Home == "" || !filepath.IsAbs(r.env.Home) {
		fmt.Fprintf(r.env.Stderr, "macake %s: HOME is %q; it must be your absolute home directory\n", r.cmd, r.env.Home)
		return "", exitcode.Usage
	}
	return filepath.Clean(r.env.Home), exitcode.OK
}
