// SPDX-License-Identifier: Apache-2.0

// Package session opens what a command that plans, changes or inspects
// the shaping works from, in the one order every such command follows:
// choose the backend for this machine (it decides which system the
// policies are checked for), read the daemon settings and the policy
// files, take the state lock, read the state file (setting a corrupt one
// aside), and open the backend on it.
//
// `macake apply`, `plan` and `down`, `macake watch`, `status` without a
// daemon, doctor and selftest all call Open; the options say which steps
// they need and whether they change the system. A run that changes the
// system holds the state lock before it reads the state file and stops at
// the first step that fails; an inspection (Inspect) never stops, and
// records each step's failure for the picture it draws.
package session

import (
	"cmp"
	"context"
	"errors"
	"os"
	"runtime"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/state"
)

// Options say what to open.
type Options struct {
	// ConfigDir is the policy directory (the settings file sits beside
	// it, settings.DaemonFileFor).
	ConfigDir string
	// StateDir is the state directory the command was given; when
	// StateDirIsDefault, the settings' state_dir replaces it.
	StateDir          string
	StateDirIsDefault bool

	// Settings, when set, are the daemon settings already read: they are
	// not read again.
	Settings *settings.Daemon
	// Policies reads the policy files too; without it only the settings
	// are read.
	Policies bool
	// Lock, when set, takes the state lock (in StateDir) before the state
	// file is read: every run that changes the system holds it. A lock on
	// the state lock itself (no Name) also prunes the last good copies of
	// removed policy files (state.PruneLastGood).
	Lock *state.LockOptions
	// State, when set, is the state file as the caller already read it
	// (doctor's snapshot): it is not read again, and the backend records
	// in memory only.
	State *state.State
	// NoState neither reads the state file nor gives it to the backend,
	// which then records in memory (selftest, doctor's backend check).
	NoState bool
	// NoBackend chooses the backend but does not open it.
	NoBackend bool
	// Inspect never stops at a failed step: each failure is recorded in
	// the Session (ChooseErr, Problems, StateErr, BackendErr) for a
	// picture of what is there (status without a daemon, doctor). Nothing
	// is written: a corrupt state file is not set aside, and the backend
	// records what it learns in memory.
	Inspect bool
	// StopAtProblems stops a run that takes no lock (a dry run) at the
	// policy files' problems, as a run that takes one always does.
	StopAtProblems bool
	// SkipOwnershipCheck does not check who owns the configuration (a
	// caller who is not root cannot be fooled into acting by it).
	SkipOwnershipCheck bool

	// GOOS is the system to choose the backend for ("" for this one),
	// Getenv the environment (nil for the process's), and Runner runs the
	// backend's commands (nil for real processes).
	GOOS   string
	Getenv func(string) string
	Runner execrun.Runner
}

// Step names the steps of Open, for an error's StepError.
type Step string

// The steps of Open, in order.
const (
	StepChoose   Step = "choose the backend"
	StepSettings Step = "read the settings"
	StepPolicies Step = "read the policy files"
	StepLock     Step = "take the state lock"
	StepState    Step = "read the state file"
	StepBackend  Step = "open the backend"
)

// StepError is the step Open stopped at and why.
type StepError struct {
	Step Step
	Err  error
}

// Error is the step's error; the step is for callers to tell them apart.
func (e *StepError) Error() string { return e.Err.Error() }

// Unwrap returns the step's error.
func (e *StepError) Unwrap() error { return e.Err }

// StepOf returns the step err (from Open) stopped at, "" for another error.
func StepOf(err error) Step {
	if se, ok := errors.AsType[*StepError](err); ok {
		return se.Step
	}
	return ""
}

// Session is what Open opened. Close releases it.
type Session struct {
	// BackendName is the backend chosen for this machine ("pf", "tc"),
	// ChooseErr why none could be (Inspect).
	BackendName string
	ChooseErr   error
	// LoadOptions are the options the policies were read with: checked
	// for the chosen backend's system and limits.
	LoadOptions config.LoadOptions
	// Policies are the settings and the valid policy files; Problems
	// every problem of every file (config.Problems lists them).
	Policies settings.Policies
	Problems error
	// StateDir is the state directory in force (the settings' state_dir
	// when the command was given the default).
	StateDir string
	// Lock is the lock held (Options.Lock); PruneErr a failure to prune
	// the last good copies of removed policy files, which only warns.
	Lock     *state.Lock
	PruneErr error
	// State is the state file, the backend's record of what it owns;
	// StateErr why it could not be read (then State is empty). A corrupt
	// file (errors.Is state.ErrCorrupt) was set aside under the lock, to
	// Aside, or not (AsideErr).
	State    *state.File
	StateErr error
	Aside    string
	AsideErr error
	// Backend is the opened backend, BackendErr why it could not be
	// opened (Inspect).
	Backend    backend.Backend
	BackendErr error
}

// Close releases the lock, if held.
func (s *Session) Close() {
	if s != nil && s.Lock != nil {
		s.Lock.Release()
		s.Lock = nil
	}
}

// Open runs the steps o asks for, in order. It always returns a Session
// holding what was read, for the caller's messages; the error is a
// *StepError naming the step that stopped it, and then the lock is
// released already. Close the Session once done with it.
func Open(ctx context.Context, o Options) (*Session, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	s := &Session{}
	stop := func(step Step, err error) (*Session, error) {
		s.Close() // a run that cannot go on holds nothing
		return s, &StepError{Step: step, Err: err}
	}

	s.BackendName, s.ChooseErr = backend.Choose(cmp.Or(o.GOOS, runtime.GOOS), getenv)
	if s.ChooseErr != nil && !o.Inspect {
		return stop(StepChoose, s.ChooseErr)
	}
	s.LoadOptions = LoadOptions(TargetOf(s.BackendName), o.SkipOwnershipCheck)
	s.LoadOptions.Context = ctx

	switch {
	case o.Settings != nil:
		s.Policies.Settings, s.Policies.SettingsFile = *o.Settings, settings.DaemonFileFor(o.ConfigDir)
		s.Policies.Dir = o.ConfigDir
		if o.Policies {
			links, warns, err := config.Load(o.ConfigDir, s.LoadOptions)
			s.Policies.Links, s.Policies.Warnings, s.Problems = links, warns, err
		}
	case o.Policies:
		s.Policies, s.Problems = settings.LoadPolicies(o.ConfigDir, s.LoadOptions)
	default:
		file := settings.DaemonFileFor(o.ConfigDir)
		daemonSettings, warns, err := settings.LoadDaemon(file, s.LoadOptions)
		s.Policies = settings.Policies{Dir: o.ConfigDir, Settings: daemonSettings, SettingsFile: file, Warnings: warns}
		if err != nil && !o.Inspect {
			return stop(StepSettings, err)
		}
		s.Problems = err
	}
	if s.Problems != nil && !o.Inspect && (o.Lock != nil || o.StopAtProblems) {
		// Acting on the valid files alone would tear down the links of
		// the broken ones.
		return stop(StepPolicies, s.Problems)
	}
	s.StateDir = s.Policies.Settings.StateDirFor(o.StateDir, o.StateDirIsDefault)

	if o.Lock != nil {
		l, err := state.AcquireLock(ctx, s.StateDir, *o.Lock)
		if err != nil {
			return stop(StepLock, err)
		}
		s.Lock = l
		if o.Lock.Name == "" && o.ConfigDir != "" {
			s.PruneErr = state.PruneLastGood(s.StateDir, o.ConfigDir)
		}
	}

	var store backend.Store
	switch {
	case o.NoState:
	case o.State != nil:
		s.State = state.InMemory(o.State)
		store = s.State
	default:
		st, err := state.Load(s.StateDir)
		switch {
		case errors.Is(err, state.ErrCorrupt) && o.Lock != nil && !o.Inspect:
			// Keep the broken file for a person; the state rebuilt from
			// the live system is written in its place.
			s.Aside, s.AsideErr = state.SetAside(s.StateDir)
		case err != nil && o.Lock != nil && !o.Inspect && !errors.Is(err, state.ErrCorrupt):
			s.StateErr = err
			return stop(StepState, err)
		}
		s.StateErr = err
		if st == nil {
			st = &state.State{}
		}
		if o.Lock != nil && !o.Inspect {
			s.State = &state.File{Dir: s.StateDir, State: st, Unrecorded: o.Lock.Unrecorded}
		} else {
			// Without the lock nothing may be written: what the backend
			// learns while looking stays in memory, or it would write the
			// state file over what watch or measure saved since (or over
			// a corrupt one a person should see).
			s.State = state.InMemory(st)
		}
		store = s.State
	}

	if o.NoBackend || s.ChooseErr != nil {
		return s, nil
	}
	s.Backend, s.BackendErr = backend.Open(backend.Config{
		Settings: BackendSettings(s.Policies.Settings), Store: store, Runner: o.Runner, Getenv: getenv, GOOS: o.GOOS,
	})
	if s.BackendErr != nil && !o.Inspect {
		return stop(StepBackend, s.BackendErr)
	}
	return s, nil
}

// TargetOf is the system whose policies the named backend shapes
// (config.TargetDarwin when it is not registered: dummynet's limits are the
// stricter).
func TargetOf(backendName string) config.Target {
	if r, ok := backend.Lookup(backendName); ok && r.Target == string(config.TargetLinux) {
		return config.TargetLinux
	}
	return config.TargetDarwin
}

// LoadOptions are the load options for policies meant for target t: they
// are checked against the limits of the backend that shapes them too.
func LoadOptions(t config.Target, skipOwnershipCheck bool) config.LoadOptions {
	o := config.LoadOptions{Target: t, SkipOwnershipCheck: skipOwnershipCheck}
	if r, ok := backend.ForTarget(string(t)); ok {
		o.Limits = r.Limits
	}
	return o
}

// BackendSettings are the part of the daemon settings a backend reads.
func BackendSettings(d settings.Daemon) backend.Settings {
	return backend.Settings{Anchor: d.Anchor, PipeFirst: d.PipeRange.First, PipeLast: d.PipeRange.Last}
}
