// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/service"
)

// Fresh is the observation of a Mac that has never seen the job; dry runs
// use it where there is no launchd to ask. /Library/LaunchDaemons exists on
// every Mac; ~/Library/LaunchAgents may not on a new account.
func Fresh(j Job) service.Observation {
	obs := service.Observation{File: service.FileMissing}
	if j.IsGUI() {
		obs.MissingDirs = append(obs.MissingDirs, filepath.Dir(j.PlistPath))
	}
	obs.MissingDirs = append(obs.MissingDirs, j.LogDir)
	return obs
}

func launchctlStep(reason string, args ...string) service.Step {
	return service.Run(reason, append([]string{Launchctl}, args...)...)
}

// PlanInstall returns the steps that make obs match j: nothing when the
// same plist is on disk and loaded (unless restart is asked for, which adds
// a `kickstart -k`). A changed plist of a loaded job is booted out and
// bootstrapped again, since launchd reads a plist only at bootstrap. Pure.
func PlanInstall(j Job, obs service.Observation, restart bool) []service.Step {
	var steps []service.Step
	for _, dir := range obs.MissingDirs {
		steps = append(steps, service.Mkdir(dir, 0o755, j.Owner, "missing"))
	}
	if obs.File != service.FileSame {
		reason := "not installed"
		if obs.File == service.FileDifferent {
			reason = "differs from the rendered plist"
		}
		steps = append(steps, service.Write(j.PlistPath, j.Plist, j.Mode, j.Owner, reason))
	}
	if obs.NoSession {
		// No GUI session to load into: launchd loads ~/Library/LaunchAgents
		// itself at the next login.
		return steps
	}
	switch {
	case obs.Loaded && obs.File != service.FileSame:
		steps = append(steps,
			launchctlStep("launchd holds the old plist; unload it first", "bootout", j.ServiceTarget()),
			launchctlStep("clear a persistent disable, if any", "enable", j.ServiceTarget()),
			launchctlStep("load the new plist and start the job", "bootstrap", j.Domain, j.PlistPath))
	case !obs.Loaded:
		steps = append(steps,
			launchctlStep("clear a persistent disable, if any", "enable", j.ServiceTarget()),
			launchctlStep("load the plist and start the job", "bootstrap", j.Domain, j.PlistPath))
	case restart:
		steps = append(steps, launchctlStep("restart requested (--restart)", "kickstart", "-k", j.ServiceTarget()))
	}
	return steps
}

// PlanUninstall returns the steps that remove j: bootout while loaded, then
// the plist. The log directory is kept: logs outlive the service. Pure.
func PlanUninstall(j Job, obs service.Observation) []service.Step {
	var steps []service.Step
	if obs.Loaded {
		steps = append(steps, launchctlStep("stop the job and unload it", "bootout", j.ServiceTarget()))
	}
	if obs.File != service.FileMissing {
		steps = append(steps, service.Remove(j.PlistPath, "so launchd does not load it at the next boot or login"))
	}
	return steps
}

// Installer observes and changes one machine's launchd jobs.
type Installer struct {
	// Files is the file system; service.OSFiles{} for real.
	Files service.Files
	// Runner runs launchctl; execrun.Exec{} for real.
	Runner execrun.Runner
	// Sleep waits between polls of a job that is still going away; nil means time.Sleep.
	Sleep func(time.Duration)
}

// launchctl's exit statuses are errno values (launchctl prints them as
// "Bootstrap failed: 5: Input/output error"); launchd adds its own above 100.
// The output text is not an API, so every check looks at the status first
// and the text only as a fallback.
const (
	lcNoSuchProcess   = 3   // ESRCH: bootout of a job that is not loaded (older releases)
	lcIOError         = 5   // EIO: bootstrap of a job already loaded, or a plist launchd rejects
	lcInProgress      = 36  // EINPROGRESS: bootout accepted, the job is still exiting
	lcAlreadyBusy     = 37  // EALREADY: an earlier bootout or bootstrap is still running
	lcNotFound        = 113 // "Could not find specified service"
	lcDomainNoSupport = 125 // "Domain does not support specified action": no GUI session
)

// pollAttempts × pollInterval bounds the wait for a booted-out job to go away.
const (
	pollAttempts = 20
	pollInterval = 250 * time.Millisecond
)

func (in *Installer) sleep(d time.Duration) {
	if in.Sleep != nil {
		in.Sleep(d)
		return
	}
	time.Sleep(d)
}

func (in *Installer) launchctl(ctx context.Context, args ...string) (execrun.Command, execrun.Result, error) {
	cmd := execrun.Command{Argv: append([]string{Launchctl}, args...)}
	res, err := in.Runner.Run(ctx, cmd)
	if err != nil {
		return cmd, res, fmt.Errorf("running launchctl: %w", err)
	}
	return cmd, res, nil
}

func output(res execrun.Result) string { return string(res.Stdout) + string(res.Stderr) }

func isNotFound(res execrun.Result) bool {
	return res.ExitCode == lcNotFound || res.ExitCode == lcNoSuchProcess ||
		strings.Contains(output(res), "Could not find service") || strings.Contains(output(res), "No such process")
}

func isNoDomain(res execrun.Result) bool {
	return res.ExitCode == lcDomainNoSupport || strings.Contains(output(res), "Could not find domain")
}

// loaded asks launchd whether j is loaded. noDomain reports a gui domain
// that does not exist.
func (in *Installer) loaded(ctx context.Context, j Job) (loaded, noDomain bool, err error) {
	cmd, res, err := in.launchctl(ctx, "print", j.ServiceTarget())
	if err != nil {
		return false, false, err
	}
	switch {
	case res.ExitCode == 0:
		return true, false, nil
	case j.IsGUI() && isNoDomain(res):
		return false, true, nil
	case isNotFound(res):
		return false, false, nil
	}
	return false, false, fmt.Errorf("asking launchd whether %s is loaded: %w", j.Label, failure(cmd, res))
}

func failure(cmd execrun.Command, res execrun.Result) error {
	return &execrun.Error{Argv: cmd.Argv, ExitCode: res.ExitCode, Stderr: bytes.TrimSpace(append(res.Stderr, res.Stdout...))}
}

// Observe reads the plist on disk, the directories and launchd's view of j,
// changing nothing.
func (in *Installer) Observe(ctx context.Context, j Job) (service.Observation, error) {
	var obs service.Observation
	for _, dir := range []string{filepath.Dir(j.PlistPath), j.LogDir} {
		if _, err := in.Files.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			obs.MissingDirs = append(obs.MissingDirs, dir)
		} else if err != nil {
			return obs, fmt.Errorf("checking %s: %w", dir, err)
		}
	}
	var err error
	if obs.File, err = service.FileStateOf(in.Files, j.PlistPath, j.Plist, j.Mode, j.Owner); err != nil {
		return obs, err
	}
	obs.Loaded, obs.NoSession, err = in.loaded(ctx, j)
	obs.Running = obs.Loaded
	return obs, err
}

// Outcome is what Apply did beyond the steps themselves.
type Outcome struct {
	// Notes are facts the user should know, e.g. that launchd already had
	// the job loaded or that a GUI login is needed to start an agent.
	Notes []string
}

// Apply runs steps for j in order and stops at the first failure, which it
// returns with launchctl's exit status and message. done is called after
// each step that completed.
func (in *Installer) Apply(ctx context.Context, j Job, steps []service.Step, done func(service.Step)) (Outcome, error) {
	var out Outcome
	bootedOut := false
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		var err error
		switch {
		case s.Kind != service.StepRun:
			err = service.ApplyFile(in.Files, s)
		case s.Argv[1] == "bootout":
			err = in.bootout(ctx, j)
			bootedOut = true
		case s.Argv[1] == "bootstrap":
			var note string
			note, err = in.bootstrap(ctx, j, bootedOut)
			if note != "" {
				out.Notes = append(out.Notes, note)
			}
		default:
			cmd, res, rerr := in.launchctl(ctx, s.Argv[1:]...)
			if err = rerr; err == nil && res.ExitCode != 0 {
				err = failure(cmd, res)
			}
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", s, err)
		}
		if done != nil {
			done(s)
		}
	}
	return out, nil
}

// bootout unloads j and waits until launchd has let go of it, so that a
// bootstrap right after does not fail with "5: Input/output error".
func (in *Installer) bootout(ctx context.Context, j Job) error {
	cmd, res, err := in.launchctl(ctx, "bootout", j.ServiceTarget())
	if err != nil {
		return err
	}
	switch {
	case res.ExitCode == 0, res.ExitCode == lcInProgress, res.ExitCode == lcAlreadyBusy:
	case isNotFound(res):
		return nil // already gone: what we wanted
	default:
		return failure(cmd, res)
	}
	for range pollAttempts {
		loaded, _, err := in.loaded(ctx, j)
		if err != nil {
			return err
		}
		if !loaded {
			return nil
		}
		in.sleep(pollInterval)
	}
	return fmt.Errorf("%s is still loaded %v after bootout; check `launchctl print %s`", j.Label, pollAttempts*pollInterval, j.ServiceTarget())
}

// bootstrap loads j. launchctl answers 5 (EIO) both when the job is already
// loaded and when it rejects the plist, so a failure is followed by a print
// to tell which; right after our own bootout it is retried while launchd
// finishes tearing the old job down.
func (in *Installer) bootstrap(ctx context.Context, j Job, afterBootout bool) (note string, err error) {
	attempts := 1
	if afterBootout {
		attempts = 5
	}
	var cmd execrun.Command
	var res execrun.Result
	for i := range attempts {
		if i > 0 {
			in.sleep(time.Second)
		}
		cmd, res, err = in.launchctl(ctx, "bootstrap", j.Domain, j.PlistPath)
		if err != nil {
			return "", err
		}
		if res.ExitCode == 0 {
			return "", nil
		}
		if j.IsGUI() && isNoDomain(res) {
			return fmt.Sprintf("no GUI login session for %s: the plist is installed and launchd starts %s at your next login", j.Domain, j.Label), nil
		}
		if res.ExitCode != lcIOError && res.ExitCode != lcAlreadyBusy {
			break
		}
	}
	loaded, _, perr := in.loaded(ctx, j)
	if perr == nil && loaded && !afterBootout {
		return fmt.Sprintf("launchd already had %s loaded (it appeared between the check and the bootstrap)", j.Label), nil
	}
	hint := fmt.Sprintf("launchd refused the job; check the plist with `plutil -lint %s` and the job with `launchctl print %s`", j.PlistPath, j.ServiceTarget())
	return "", fmt.Errorf("%w; %s", failure(cmd, res), hint)
}
