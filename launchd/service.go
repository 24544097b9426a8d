// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/macake/macake/diag"
	"github.com/macake/macake/execrun"
)

// Host is the machine the service commands act on: its OS, its file
// system, launchctl, where the running binary is, and how to wait. The CLI
// fills it with the real ones; tests with launchdtest's fakes, so the
// whole install and uninstall flow runs on Linux.
type Host struct {
	// GOOS is the machine's OS: off darwin there is no launchd to ask, so
	// only dry runs work, and they show what a Mac would get.
	GOOS string
	// Files is the file system; OSFiles{} for real.
	Files Files
	// Runner runs launchctl; execrun.Exec{} for real.
	Runner execrun.Runner
	// Executable returns the running binary's path (os.Executable), the
	// program a job runs unless another binary is asked for.
	Executable func() (string, error)
	// Sleep waits between polls of a job that is still going away; nil
	// means time.Sleep.
	Sleep func(time.Duration)
}

func (h Host) installer() *Installer {
	return &Installer{Files: h.Files, Runner: h.Runner, Sleep: h.Sleep}
}

// ReportFormatVersion is the format_version of a Report: readers check it
// before they rely on the fields. 2.0: error and warnings are objects of
// the one error schema (package diag) instead of strings.
const ReportFormatVersion = "2.0"

// Report is what an install or uninstall found and did; it is the --json
// document of the four service commands, so its fields are a contract.
type Report struct {
	FormatVersion    string            `json:"format_version"`
	DryRun           bool              `json:"dry_run"`
	Label            string            `json:"label"`
	ServiceTarget    string            `json:"service_target"`
	PlistPath        string            `json:"plist_path"`
	LogPath          string            `json:"log_path"`
	ProgramArguments []string          `json:"program_arguments,omitempty"`
	Observed         *Observation      `json:"observed,omitempty"`
	Changed          bool              `json:"changed"`
	Steps            []Step            `json:"steps"`
	Notes            []string          `json:"notes,omitempty"`
	Warnings         []diag.Diagnostic `json:"warnings,omitempty"`
	// Plist is the rendered plist, in a dry run of an install.
	Plist string `json:"plist,omitempty"`
	// DownExitCode is the exit status of `macake down` after the daemon
	// was uninstalled; nil when it was not run.
	DownExitCode *int             `json:"down_exit_code,omitempty"`
	Error        *diag.Diagnostic `json:"error,omitempty"`

	// Job is the job the report is about, for the text a CLI prints
	// around the steps (its owner and mode, its domain).
	Job Job `json:"-"`
}

func newReport(j Job, dryRun bool) *Report {
	return &Report{FormatVersion: ReportFormatVersion, DryRun: dryRun, Label: j.Label, ServiceTarget: j.ServiceTarget(),
		PlistPath: j.PlistPath, LogPath: j.LogPath, Job: j}
}

// setSteps records the plan; a plan of nothing is an empty list, not a
// missing one, for JSON readers.
func (r *Report) setSteps(steps []Step) {
	if steps == nil {
		steps = []Step{}
	}
	r.Steps, r.Changed = steps, len(steps) > 0
}

// RequestError is a problem with what was asked (a binary that is not
// one, a path a service cannot use), not with the machine: asking
// differently fixes it, so the CLI exits with its usage status.
type RequestError struct{ Err error }

// Error is the problem as the person who asked should read it.
func (e *RequestError) Error() string { return e.Err.Error() }

// Unwrap returns the problem.
func (e *RequestError) Unwrap() error { return e.Err }

func requestErrorf(format string, args ...any) error {
	return &RequestError{Err: fmt.Errorf(format, args...)}
}

// DownError is an uninstall of the daemon that removed the job but whose
// `macake down` failed: the shaping the daemon left may still be there.
type DownError struct {
	// ExitCode is down's exit status.
	ExitCode int
}

// Error says what is left.
func (e *DownError) Error() string {
	return fmt.Sprintf("macake down exited %d; shaping may still be in place", e.ExitCode)
}

// Progress hears what an install or uninstall has to say while it runs,
// so that a CLI prints it as it happens and in order; the Report holds
// the same warnings and notes afterwards. Nil fields are skipped.
type Progress struct {
	// Warning is something the person should fix or know before relying
	// on the job (a temporary binary, one others can replace).
	Warning func(msg string)
	// Note is a fact about the machine that explains the outcome (no
	// launchd off macOS, no GUI session for an agent).
	Note func(msg string)
	// Done is called after each step that completed.
	Done func(Step)
	// Applied is called once the steps of a real run are done, before
	// what follows them (the uninstalled daemon's down), with the report
	// so far.
	Applied func(*Report)
}

func (p Progress) warning(msg string) {
	if p.Warning != nil {
		p.Warning(msg)
	}
}

func (p Progress) note(msg string) {
	if p.Note != nil {
		p.Note(msg)
	}
}

func (p Progress) applied(r *Report) {
	if p.Applied != nil {
		p.Applied(r)
	}
}

// ProgramRequest says what a service should run.
type ProgramRequest struct {
	// Binary is the macake executable; "" is the running one
	// (Host.Executable).
	Binary string
	// ConfigDir and StateDir are the directories the job is to use; they
	// are made absolute.
	ConfigDir, StateDir string
	// Agent asks for the user LaunchAgent (monitor), which runs as the
	// user: the checks that protect root do not apply to it.
	Agent bool
	// Lenient turns a missing or non-executable binary into a warning:
	// for a dry run, or a unit rendered for another machine.
	Lenient bool
}

// ResolveProgram works out what a job runs: the binary, made absolute but
// not symlink-resolved (Homebrew's /opt/homebrew/bin/macake is a stable
// symlink into a versioned Cellar path that an upgrade deletes), and the
// absolute config and state directories. It checks the binary and warns
// (through p, and in the returned list) about what would make the job
// fragile or unsafe. A *RequestError is a binary or path that cannot be
// used.
func ResolveProgram(h Host, req ProgramRequest, p Progress) (Program, []string, error) {
	var warnings []string
	warn := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		warnings = append(warnings, msg)
		p.warning(msg)
	}
	binary := req.Binary
	if binary == "" {
		exe, err := h.Executable()
		if err != nil {
			return Program{}, nil, fmt.Errorf("cannot tell where this program is (%v); pass --binary PATH", err)
		}
		binary = exe
		if strings.Contains(binary, "/go-build") {
			warn("%s looks like a temporary `go run` build that will disappear; pass --binary with an installed macake", binary)
		}
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	prog := Program{Binary: abs(binary), ConfigDir: abs(req.ConfigDir), StateDir: abs(req.StateDir)}
	if err := prog.Validate(); err != nil {
		return prog, nil, &RequestError{Err: err}
	}
	fi, err := h.Files.Stat(prog.Binary)
	problem := ""
	switch {
	case errors.Is(err, fs.ErrNotExist):
		problem = "no such file"
	case err != nil:
		problem = err.Error()
	case fi.IsDir || fi.Mode.Perm()&0o111 == 0:
		problem = "not an executable file"
	}
	if problem != "" {
		if !req.Lenient {
			return prog, nil, requestErrorf("--binary %s: %s; pass the path of an installed macake", prog.Binary, problem)
		}
		warn("%s: %s", prog.Binary, problem)
	}
	if !req.Agent && err == nil {
		// A root daemon running a file its user can replace hands root to
		// anything running as that user.
		if dfi, derr := h.Files.Stat(filepath.Dir(prog.Binary)); derr == nil {
			for _, f := range []struct {
				path string
				fi   FileInfo
			}{{prog.Binary, fi}, {filepath.Dir(prog.Binary), dfi}} {
				if f.fi.UID > 0 || f.fi.Mode.Perm()&0o022 != 0 {
					warn("%s is writable by someone other than root (owner uid %d, mode %04o): whoever can change it can replace what launchd runs as root; "+
						"install a copy where only root can write (sudo make install PREFIX=/opt/macake) and pass --binary /opt/macake/bin/macake", f.path, f.fi.UID, f.fi.Mode.Perm())
					break
				}
			}
		}
	}
	if !req.Agent {
		if _, err := h.Files.Stat(prog.ConfigDir); errors.Is(err, fs.ErrNotExist) {
			warn("%s does not exist yet: watch shapes nothing until a policy file is there", prog.ConfigDir)
		}
	}
	return prog, warnings, nil
}

// InstallRequest is one install of the LaunchDaemon (watch) or the user
// LaunchAgent (monitor).
type InstallRequest struct {
	// Program is what the job runs (ResolveProgram); Warnings are the
	// warnings met resolving it, which the report lists first.
	Program  Program
	Warnings []string
	// Agent installs the user LaunchAgent of the user UID, whose home
	// directory is Home (absolute), instead of the LaunchDaemon.
	Agent bool
	Home  string
	UID   int
	// DryRun plans without changing anything; the report then carries
	// the rendered plist.
	DryRun bool
	// Restart restarts a job that is already installed and loaded as
	// asked (launchctl kickstart -k).
	Restart bool
}

// Install makes the machine run req's job: it renders the plist, observes
// what is installed and loaded, plans the steps (nothing when all is as
// asked) and, unless a dry run, applies them. The report is nil when it
// stopped before planning (an unusable request, a *RequestError, or a
// machine it could not read); after a failed step it is returned with the
// error, which it also records.
func Install(ctx context.Context, h Host, req InstallRequest, p Progress) (*Report, error) {
	var job Job
	var err error
	args := DaemonArgs(req.Program)
	if req.Agent {
		job, err = AgentJob(req.Program, req.Home, req.UID)
		args = AgentArgs(req.Program, req.Home)
	} else {
		job, err = DaemonJob(req.Program)
	}
	if err != nil {
		return nil, &RequestError{Err: err}
	}
	rep := newReport(job, req.DryRun)
	rep.ProgramArguments, rep.Warnings = args, diag.Messages(req.Warnings)
	obs, err := observe(ctx, h, job, req.DryRun, rep, Fresh(job), "that does not have the job yet", p)
	if err != nil {
		return nil, err
	}
	rep.Observed = &obs
	steps := PlanInstall(job, obs, req.Restart)
	rep.setSteps(steps)
	if req.DryRun {
		rep.Plist = string(job.Plist)
		return rep, nil
	}
	outcome, err := h.installer().Apply(ctx, job, steps, p.Done)
	rep.Notes = outcome.Notes
	for _, n := range outcome.Notes {
		p.note(n)
	}
	if err != nil {
		rep.Error = diag.OfPtr(err)
		return rep, err
	}
	p.applied(rep)
	return rep, nil
}

// UninstallRequest is one removal of the LaunchDaemon or the user
// LaunchAgent.
type UninstallRequest struct {
	// Agent removes the user LaunchAgent of the user UID with home
	// directory Home instead of the LaunchDaemon.
	Agent bool
	Home  string
	UID   int
	// DryRun plans without changing anything.
	DryRun bool
	// Down runs `macake down` and returns its exit status. It is run
	// after the daemon is gone, since the daemon leaves its shaping in
	// place when stopped (launchd would restart it) and uninstalling
	// means the user wants it gone. nil runs nothing.
	Down func() int
}

// Uninstall removes req's job: it boots the job out of launchd and
// removes the plist (the logs are kept), then, for the daemon, runs
// req.Down. When a step fails, down is not run: the daemon may still be
// running and would re-apply what down removes. The report is nil when it
// could not read the machine; otherwise it is returned with any error,
// which it also records: a *DownError when only down failed.
func Uninstall(ctx context.Context, h Host, req UninstallRequest, p Progress) (*Report, error) {
	job := Daemon()
	if req.Agent {
		job = Agent(req.Home, req.UID)
	}
	rep := newReport(job, req.DryRun)
	installed := Observation{Plist: PlistDifferent, Loaded: true}
	obs, err := observe(ctx, h, job, req.DryRun, rep, installed, "that has the job installed and loaded", p)
	if err != nil {
		return nil, err
	}
	rep.Observed = &obs
	steps := PlanUninstall(job, obs)
	rep.setSteps(steps)
	if req.DryRun {
		return rep, nil
	}
	if _, err := h.installer().Apply(ctx, job, steps, p.Done); err != nil {
		rep.Error = diag.OfPtr(err)
		return rep, err
	}
	p.applied(rep)
	if req.Agent || req.Down == nil {
		return rep, nil
	}
	code := req.Down()
	rep.DownExitCode = &code
	if code != 0 {
		err := &DownError{ExitCode: code}
		rep.Error = diag.OfPtr(err)
		return rep, err
	}
	return rep, nil
}

// observe reads the machine's state for job. Off macOS there is nothing to
// ask, so a dry run shows the fallback situation (described by the phrase
// "on a Mac …"). A dry run that cannot observe (e.g. launchctl refusing a
// non-root print) falls back to it too; a real run stops.
func observe(ctx context.Context, h Host, job Job, dryRun bool, rep *Report, fallback Observation, situation string, p Progress) (Observation, error) {
	if h.GOOS != "darwin" {
		note := "launchd is macOS-only; this is what the command does on a Mac " + situation
		rep.Notes = append(rep.Notes, note)
		p.note(note)
		return fallback, nil
	}
	obs, err := h.installer().Observe(ctx, job)
	if err == nil {
		return obs, nil
	}
	if dryRun {
		msg := fmt.Sprintf("cannot read the current state (%v); showing the steps on a Mac %s", err, situation)
		rep.Warnings = append(rep.Warnings, diag.Diagnostic{Message: msg})
		p.warning(msg)
		return fallback, nil
	}
	return obs, err
}
