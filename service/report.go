// SPDX-License-Identifier: Apache-2.0

package service

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/macake/macake/diag"
)

// ReportFormatVersion is the format_version of a Report: readers check it
// before they rely on the fields. 2.0: error and warnings are objects of
// the one error schema (package diag) instead of strings. 3.0: systemd's
// reports beside launchd's: "system" names the service manager,
// plist_path became path, plist content, observed.plist observed.file,
// observed.no_gui_session observed.no_session, a launchctl step a "run"
// step; log_command and observed.running are new.
const ReportFormatVersion = "3.0"

// Report is what an install or uninstall found and did; it is the --json
// document of the four service commands, so its fields are a contract.
type Report struct {
	FormatVersion string `json:"format_version"`
	DryRun        bool   `json:"dry_run"`
	// System is the service manager: "launchd" or "systemd".
	System string `json:"system"`
	// Label is the job's name: "org.macake.watch", "macake-watch.service".
	Label string `json:"label"`
	// ServiceTarget is how the manager's tool names the job, e.g.
	// "system/org.macake.watch" (launchctl), "macake-watch.service".
	ServiceTarget string `json:"service_target"`
	// Path is the service file: the plist or the unit.
	Path string `json:"path"`
	// LogPath is the log file the job writes; LogCommand shows the log
	// where there is no file (systemd's journal). One of them is set.
	LogPath          string            `json:"log_path,omitempty"`
	LogCommand       string            `json:"log_command,omitempty"`
	ProgramArguments []string          `json:"program_arguments,omitempty"`
	Observed         *Observation      `json:"observed,omitempty"`
	Changed          bool              `json:"changed"`
	Steps            []Step            `json:"steps"`
	Notes            []string          `json:"notes,omitempty"`
	Warnings         []diag.Diagnostic `json:"warnings,omitempty"`
	// Content is the rendered service file, in a dry run of an install.
	Content string `json:"content,omitempty"`
	// DownExitCode is the exit status of `macake down` after the daemon
	// was uninstalled; nil when it was not run.
	DownExitCode *int             `json:"down_exit_code,omitempty"`
	Error        *diag.Diagnostic `json:"error,omitempty"`

	// Text is what a person reads around the steps; not in the JSON.
	Text Text `json:"-"`
}

// Text is what the CLI prints about a job besides its steps: the
// manager's own words and the commands that inspect it.
type Text struct {
	// Kind names the job as the manager does: "LaunchDaemon", "systemd
	// unit", "user unit".
	Kind string
	// FileKind names its file: "plist", "unit".
	FileKind string
	// FileAttrs is the service file's owner and mode, e.g. "root:wheel 0644".
	FileAttrs string
	// Inspect is the command that shows the manager's view of the job,
	// e.g. "sudo launchctl print system/org.macake.watch".
	Inspect string
	// Kept says where the logs stay after an uninstall.
	Kept string
	// Agent says the job is the user's monitor, not the root daemon.
	Agent bool
}

// NewReport starts a report of the job label on system.
func NewReport(system, label, target, path string, dryRun bool) *Report {
	return &Report{FormatVersion: ReportFormatVersion, DryRun: dryRun, System: system, Label: label, ServiceTarget: target, Path: path}
}

// SetSteps records the plan; a plan of nothing is an empty list, not a
// missing one, for JSON readers.
func (r *Report) SetSteps(steps []Step) {
	if steps == nil {
		steps = []Step{}
	}
	r.Steps, r.Changed = steps, len(steps) > 0
}

// FileState compares the service file on disk with the rendered one.
type FileState string

// The states of the service file on disk.
const (
	FileMissing   FileState = "missing"
	FileSame      FileState = "same"      // same bytes, mode and owner
	FileDifferent FileState = "different" // other bytes, or wrong mode or owner
)

// Observation is what is on the machine now, read without changing anything.
type Observation struct {
	File FileState `json:"file"`
	// Loaded reports that the manager knows the job and starts it by
	// itself: loaded (launchd), enabled (systemd).
	Loaded bool `json:"loaded"`
	// Running reports that the job runs now (systemd: active); launchd
	// runs a loaded job.
	Running bool `json:"running,omitempty"`
	// NoSession reports that the user's manager cannot be reached: no GUI
	// login (launchd's gui/<uid> domain), no user systemd (an ssh session
	// without one). The file is installed and starts at the next login.
	NoSession bool `json:"no_session,omitempty"`
	// MissingDirs are the directories the job needs that do not exist yet.
	MissingDirs []string `json:"missing_dirs,omitempty"`
}

// StepKind is what one step does.
type StepKind string

// The step kinds.
const (
	StepMkdir  StepKind = "mkdir"
	StepWrite  StepKind = "write"
	StepRemove StepKind = "remove"
	StepRun    StepKind = "run" // the manager's tool: launchctl, systemctl
)

// Step is one action of an install or uninstall, as data: printed by
// --dry-run, carried out by the manager.
type Step struct {
	Kind   StepKind `json:"action"`
	Path   string   `json:"path,omitempty"`
	Mode   string   `json:"mode,omitempty"`  // e.g. "0644"
	Owner  string   `json:"owner,omitempty"` // e.g. "root:wheel"
	Argv   []string `json:"argv,omitempty"`
	Reason string   `json:"reason"`

	perm  fs.FileMode
	owner Owner
	data  []byte
}

// Mkdir is the step that creates dir (and its parents) with perm and owner.
func Mkdir(dir string, perm fs.FileMode, owner Owner, reason string) Step {
	return Step{Kind: StepMkdir, Path: dir, Mode: fmt.Sprintf("%04o", perm), Owner: owner.Name, perm: perm, owner: owner, Reason: reason}
}

// Write is the step that replaces path with data, perm and owner.
func Write(path string, data []byte, perm fs.FileMode, owner Owner, reason string) Step {
	return Step{Kind: StepWrite, Path: path, Mode: fmt.Sprintf("%04o", perm), Owner: owner.Name, perm: perm, owner: owner, data: data, Reason: reason}
}

// Remove is the step that deletes path.
func Remove(path, reason string) Step {
	return Step{Kind: StepRemove, Path: path, Reason: reason}
}

// Run is the step that runs argv, the manager's tool.
func Run(reason string, argv ...string) Step {
	return Step{Kind: StepRun, Argv: argv, Reason: reason}
}

// Object renders what s acts on: a path with its owner and mode, or the
// argv.
func (s Step) Object() string {
	switch s.Kind {
	case StepRun:
		return strings.Join(s.Argv, " ")
	case StepMkdir, StepWrite:
		attrs := s.Mode
		if s.Owner != "" {
			attrs = s.Owner + " " + attrs
		}
		return fmt.Sprintf("%s (%s)", s.Path, attrs)
	}
	return s.Path
}

// String renders s as one line, e.g. "write /Library/LaunchDaemons/… (root:wheel 0644)".
func (s Step) String() string {
	verb := map[StepKind]string{StepMkdir: "create", StepWrite: "write", StepRemove: "remove", StepRun: "run"}[s.Kind]
	return verb + " " + s.Object()
}

// ApplyFile carries out a step on the file system (mkdir, write,
// remove); removing what is already gone is done.
func ApplyFile(files Files, s Step) error {
	switch s.Kind {
	case StepMkdir:
		return files.MkdirAll(s.Path, s.perm, s.owner)
	case StepWrite:
		return files.WriteFile(s.Path, s.data, s.perm, s.owner)
	case StepRemove:
		if err := files.Remove(s.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return fmt.Errorf("step %q is not a file's", s.Kind)
}

// FileStateOf compares the file at path with want, its content, mode and
// owner: a file with the same bytes but a loose mode or another owner
// must still be rewritten (launchd is reported to refuse group- or
// world-writable plists; a unit others can write hands them root).
func FileStateOf(files Files, path string, want []byte, perm fs.FileMode, owner Owner) (FileState, error) {
	onDisk, err := files.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return FileMissing, nil
	case err != nil:
		return FileMissing, fmt.Errorf("reading %s: %w", path, err)
	}
	if want == nil || string(onDisk) != string(want) {
		return FileDifferent, nil
	}
	fi, err := files.Stat(path)
	if err != nil || fi.Mode.Perm() != perm.Perm() {
		return FileDifferent, nil
	}
	if fi.UID >= 0 && owner.UID >= 0 && (fi.UID != owner.UID || fi.GID != owner.GID) {
		return FileDifferent, nil
	}
	return FileSame, nil
}

// Progress hears what an install or uninstall has to say while it runs,
// so that a CLI prints it as it happens and in order; the Report holds
// the same warnings and notes afterwards. Nil fields are skipped.
type Progress struct {
	// Warning is something the person should fix or know before relying
	// on the job (a temporary binary, one others can replace).
	Warning func(msg string)
	// Note is a fact about the machine that explains the outcome (no
	// GUI session for an agent, systemd not running).
	Note func(msg string)
	// Done is called after each step that completed.
	Done func(Step)
	// Applied is called once the steps of a real run are done, before
	// what follows them (the uninstalled daemon's down), with the report
	// so far.
	Applied func(*Report)
}

// Warn says msg through Warning.
func (p Progress) Warn(msg string) {
	if p.Warning != nil {
		p.Warning(msg)
	}
}

// Say says msg through Note.
func (p Progress) Say(msg string) {
	if p.Note != nil {
		p.Note(msg)
	}
}

// Finished reports r through Applied.
func (p Progress) Finished(r *Report) {
	if p.Applied != nil {
		p.Applied(r)
	}
}

// RequestError is a problem with what was asked (a binary that is not
// one, a path a service cannot use), not with the machine: asking
// differently fixes it, so the CLI exits with its usage status.
type RequestError struct{ Err error }

// Error is the problem as the person who asked should read it.
func (e *RequestError) Error() string { return e.Err.Error() }

// Unwrap returns the problem.
func (e *RequestError) Unwrap() error { return e.Err }

// RequestErrorf formats a RequestError.
func RequestErrorf(format string, args ...any) error {
	return &RequestError{Err: fmt.Errorf(format, args...)}
}

// UnavailableError is a machine without the service manager a command
// needs (systemd not running, launchd off macOS): only a dry run works
// there, and the CLI exits with its unavailable status.
type UnavailableError struct{ Err error }

// Error says what is missing and what to do instead.
func (e *UnavailableError) Error() string { return e.Err.Error() }

// Unwrap returns the problem.
func (e *UnavailableError) Unwrap() error { return e.Err }

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
