// SPDX-License-Identifier: Apache-2.0

// Package shaperun is one run of the commands that read, and maybe change,
// the live shaping (apply, plan, down; watch and selftest open their
// settings through it) as the command line shows it: it opens the world
// (session.Open) saying on the way what a person needs to know, runs the
// reconcile pass, prints the plan and what was applied, and maps every
// outcome to its exit status. Package main parses the flags and calls it.
package shaperun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/session"
	"github.com/macake/macake/state"
)

// Env is what a run touches of the outside world, as package main's
// command line gives it.
type Env struct {
	Ctx            context.Context
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// EUID is the effective user id: who runs it decides the lock's
	// ownership checks and whether a dry run may read the live state.
	EUID int
	// ConfigDir and StateDir are --config-dir and --state-dir;
	// StateDirIsDefault tells that --state-dir was left at its default
	// (macake.toml's state_dir then applies, and the directory may be
	// created).
	ConfigDir, StateDir string
	StateDirIsDefault   bool
	// Invocation is how the person ran macake, for the commands the
	// messages name.
	Invocation config.Invocation
	// Runner, when not nil, runs the backend's commands instead of real
	// processes (the CLI tests' emulator).
	Runner execrun.Runner
	// LockWait is how long a command that changes the shaping waits for
	// another one's lock.
	LockWait time.Duration
	// SelftestLeftovers, when not nil, removes what a killed selftest
	// left (with dryRun, only names it), for down; package main hands in
	// selftest's, which links the concrete backends that a run itself
	// reaches only through the backend interface.
	SelftestLeftovers func(ctx context.Context, stateDir string, daemon settings.Daemon, getenv func(string) string, dryRun bool) (string, error)
}

// Flags are the flags of apply, plan and down.
type Flags struct {
	DryRun, Detailed, ShowCommands, JSON bool
	// Color colours the plan (--color, decided for standard output).
	Color bool
	// Out saves the plan of a dry run; Link scopes to one link; Saved is
	// a saved plan to apply.
	Out, Link, Saved string
}

// Invocation is one run of a command that reads, and maybe changes, the
// live shaping state: the configuration, the state file, the lock and the
// backend.
type Invocation struct {
	env    Env
	cmd    string
	dryRun bool

	// What the run opened: the backend's name, the settings and policies,
	// the state directory they choose and the session itself.
	BackendName string
	Policies    settings.Policies
	StateDir    string
	Session     *session.Session

	tokens  *state.File
	backend backend.Backend
	info    backend.Info
}

// New starts a run of the command named cmd (for its messages); a dry run
// takes no lock and changes nothing.
func New(env Env, cmd string, dryRun bool) *Invocation {
	return &Invocation{env: env, cmd: cmd, dryRun: dryRun}
}

// Close releases what the run opened: the lock, the backend.
func (s *Invocation) Close() { s.Session.Close() }

// OpenSettings reads the daemon settings only, saying what is wrong with
// them (watch and selftest, which open the rest themselves). It returns
// the exit status and false when the command must stop.
func (s *Invocation) OpenSettings() (int, bool) { return s.open(openSettings, nil) }

// Errorf prints "macake CMD: message" on stderr.
func (s *Invocation) Errorf(format string, args ...any) {
	fmt.Fprintf(s.env.Stderr, "macake %s: %s\n", s.cmd, fmt.Sprintf(format, args...))
}

// Fail prints err and returns the exit status it maps to.
func (s *Invocation) Fail(err error) int {
	s.Errorf("%v", err)
	switch {
	case backend.Unavailable(err):
		if s.env.EUID != 0 && errors.Is(err, backend.ErrNeedsRoot) {
			fmt.Fprintf(s.env.Stderr, "Reading pf and dummynet needs root, even for a dry run. Run with sudo.\n")
		}
		return exitcode.Unavailable
	case errors.Is(err, config.ErrNeedsMeasurement):
		return exitcode.Unavailable
	}
	return exitcode.Failure
}

// What open opens (session.Open), besides the backend's choice.
type opening int

const (
	// openSettings reads the settings only (watch and selftest, which
	// open the rest themselves).
	openSettings opening = iota
	// openForDown reads the settings, then takes the lock (unless a dry
	// run), reads the state file and opens the backend.
	openForDown
	// openForApply is openForDown with the policy files.
	openForApply
	// openForTeardown is openForDown for down, the off switch: it goes on
	// when the state directory's disk takes no write (read-only, full),
	// and says what it could not record.
	openForTeardown
)

// open opens what the command works from (session.Open) and says on
// stderr what a person needs to know on the way. A dry run takes no lock
// and writes nothing. onProblems, when set, hears the policy files'
// problems, which stop the command (exit 78): applying only the valid
// files would tear down the links of the broken ones.
func (s *Invocation) open(what opening, onProblems func(problems []*config.Problem)) (int, bool) {
	e := s.env
	o := session.Options{
		ConfigDir: e.ConfigDir, StateDir: e.StateDir, StateDirIsDefault: e.StateDirIsDefault,
		Policies: what == openForApply, StopAtProblems: true, NoState: what == openSettings, NoBackend: what == openSettings,
		SkipOwnershipCheck: e.EUID != 0, Getenv: e.Getenv, Runner: e.Runner,
	}
	if !s.dryRun && what != openSettings {
		o.Lock = &state.LockOptions{Wait: e.LockWait, SkipOwnershipCheck: e.EUID != 0, MayCreate: e.StateDirIsDefault,
			Unrecorded: what == openForTeardown}
	}
	ses, err := session.Open(e.Ctx, o)
	s.Session, s.BackendName, s.Policies, s.StateDir = ses, ses.BackendName, ses.Policies, ses.StateDir
	if session.StepOf(err) == session.StepChoose {
		if backend.Unavailable(err) {
			return s.Fail(err), false
		}
		s.Errorf("%v", err)
		return exitcode.Usage, false
	}
	for _, w := range ses.Policies.Warnings {
		fmt.Fprintln(e.Stderr, w.String())
	}
	switch step := session.StepOf(err); {
	case step == session.StepSettings:
		for _, pr := range config.Problems(err) {
			fmt.Fprintln(e.Stderr, pr.Error())
		}
		s.Errorf("the daemon settings are invalid; nothing was changed (they name the anchor and pipe range macake owns)")
		return exitcode.Config, false
	case step == session.StepPolicies:
		problems := config.Problems(err)
		fmt.Fprintf(e.Stderr, "Reading policy files in %s … failed\n", e.ConfigDir)
		for _, pr := range problems {
			fmt.Fprintln(e.Stderr, pr.Error())
		}
		s.Errorf("%s: nothing was changed, so shaping that works stays as it is; fix the files (see '%s') and run it again", english.Plural(len(problems), "configuration problem"), e.Invocation.Command(false, "validate"))
		if onProblems != nil {
			onProblems(problems)
		}
		return exitcode.Config, false
	case what == openForApply:
		fmt.Fprintf(e.Stderr, "Reading %s in %s … ok\n", english.Plural(len(ses.Policies.Links), "file"), e.ConfigDir)
		if len(ses.Policies.Links) == 0 {
			fmt.Fprintf(e.Stderr, "warning: no policy files (*.toml) in %s: nothing is to be shaped, so everything macake shapes now is removed\n", e.ConfigDir)
		}
	}
	if session.StepOf(err) == session.StepLock {
		return s.Fail(err), false
	}
	if err := ses.Lock.Unrecorded(); err != nil {
		fmt.Fprintf(e.Stderr, "warning: the state directory %s takes no write (%v): going on without recording anything there\n", ses.StateDir, err)
	}
	if ses.PruneErr != nil {
		fmt.Fprintf(e.Stderr, "warning: %v\n", ses.PruneErr)
	}
	switch {
	case errors.Is(ses.StateErr, state.ErrCorrupt):
		fmt.Fprintf(e.Stderr, "warning: %v\n", ses.StateErr)
		switch {
		case s.dryRun:
		case ses.AsideErr == nil:
			fmt.Fprintf(e.Stderr, "warning: a copy of the corrupt state file is kept in %s\n", ses.Aside)
		default:
			fmt.Fprintf(e.Stderr, "warning: %v\n", ses.AsideErr)
		}
	case session.StepOf(err) == session.StepState:
		return s.Fail(err), false
	case ses.StateErr != nil:
		fmt.Fprintf(e.Stderr, "warning: %v; planning as if it were empty\n", ses.StateErr)
	}
	if err != nil {
		return s.Fail(err), false
	}
	s.tokens, s.backend = ses.State, ses.Backend
	if s.backend != nil {
		s.info = s.backend.Info()
	}
	return exitcode.OK, true
}

// readingLive prints the progress line `Reading live state (SCOPE) … ok`
// for a pass that read (or tried to read) the live state.
func (s *Invocation) readingLive(out *reconcile.Outcome) {
	result := "ok"
	switch {
	case out.Blind:
		result = "not read: it needs root"
	case out.Step == reconcile.StepObserve:
		result = "failed"
	}
	fmt.Fprintf(s.env.Stderr, "Reading live state (%s) … %s\n", s.info.Scope, result)
}

// Outcome is what apply reports: the plan, whether any of it was
// applied, the errors met, and the exit status.
type Outcome struct {
	Plan    plan.Plan
	Applied bool
	Errs    []error
	Code    int
	// liveUnread: the plan is everything macake would own, made without
	// reading the live state (a dry run without root).
	liveUnread bool
}

// liveUnreadNote qualifies a plan made without reading the live state.
const liveUnreadNote = "The live state cannot be read without root, so this is everything macake would own for the links that match now, not the difference from what is live. Run it with sudo to see only the differences."

// Apply runs apply (a dry run: plan), or applies the saved plan
// f.Saved, prints the plan and the outcome (one JSON document with
// f.JSON) and returns the exit status.
func (s *Invocation) Apply(f Flags) int {
	var out Outcome
	if f.Saved != "" {
		out = s.applySaved(f)
	} else {
		out = s.ApplyOnce(f)
	}
	if f.JSON {
		doc := plan.Document(out.Plan, f.DryRun, out.Applied, out.Errs)
		if out.liveUnread {
			doc.LiveStateNotRead, doc.Note = true, liveUnreadNote
		}
		plan.WriteDocument(s.env.Stdout, doc)
	}
	return out.Code
}

// planText are the plan's text options for this invocation.
func (s *Invocation) planText(f Flags, subject string) plan.TextOptions {
	return plan.TextOptions{
		Color: f.Color, ShowCommands: f.ShowCommands, DryRun: f.DryRun, Symbols: true,
		SharedGroup: s.info.SharedGroup, Subject: subject,
	}
}

// ApplyOnce runs one pass over the policy files: it plans (and, unless a
// dry run, applies) and prints the plan and what was applied.
func (s *Invocation) ApplyOnce(f Flags) (out Outcome) {
	stop, fail := s.stoppers(&out)

	var prints map[string]string
	if f.Out != "" {
		// Before loading: a file that changes in between makes the saved
		// plan refuse to apply, never apply what nobody reviewed.
		var err error
		if prints, err = reconcile.PolicyFingerprints(s.env.ConfigDir); err != nil {
			return fail(err)
		}
	}
	if code, ok := s.open(openForApply, func(problems []*config.Problem) {
		for _, p := range problems {
			out.Errs = append(out.Errs, p)
		}
	}); !ok {
		return stop(code)
	}
	facts, err := linkfacts.Read(s.env.Ctx, s.env.Getenv)
	if err != nil {
		return fail(fmt.Errorf("reading link facts: %w", err))
	}
	in := reconcile.PassInput{
		Run:   s.run(f, &out, f.Link),
		Links: s.Policies.Links, Facts: facts,
		Inputs: desired.Inputs{State: s.tokens.State, MTU: reconcile.PolicyMTUs(s.Policies.Links), Reflectors: watchReflectors(s),
			Invocation: s.env.Invocation},
		// A dry run that may not read the live state plans without it:
		// the backend refused a caller who is not root (pf and dummynet
		// on macOS). A plan to save must have read it.
		Blind: f.DryRun && s.env.EUID != 0 && f.Out == "",
	}
	res := reconcile.Pass(s.env.Ctx, in)
	if code, done := s.passFailed(f, &out, res); done {
		return out.withCode(code)
	}
	if f.Out != "" {
		sp, err := reconcile.NewSavedPlan(&res, in, s.BackendName, s.env.ConfigDir, prints, time.Now())
		if err == nil {
			err = sp.Write(f.Out)
		}
		if err != nil {
			return fail(fmt.Errorf("saving the plan to %s: %w", f.Out, err))
		}
		if !f.JSON {
			fmt.Fprintf(s.env.Stdout, "\nSaved the plan to %s. To apply exactly this plan, run:\n  %s\n", f.Out, s.env.Invocation.Command(true, "apply", f.Out))
		}
	}
	return out.withCode(s.changesCode(f, res))
}

// applySaved applies a saved plan (macake apply FILE): it reads the file,
// the daemon settings (not the policies: their fingerprints stand for
// them), the state and the network, and runs the pass that checks and
// applies it.
func (s *Invocation) applySaved(f Flags) (out Outcome) {
	stop, fail := s.stoppers(&out)
	saved, err := reconcile.ReadSavedPlan(f.Saved)
	if err != nil {
		return fail(err)
	}
	scope := ""
	if saved.Link != "" {
		scope = ", for link " + saved.Link + " alone"
	}
	fmt.Fprintf(s.env.Stderr, "Reading saved plan %s (made %s%s) … ok\n", f.Saved, saved.Made.Local().Format(time.DateTime), scope)
	if code, ok := s.open(openForDown, nil); !ok {
		return stop(code)
	}
	facts, err := linkfacts.Read(s.env.Ctx, s.env.Getenv)
	if err != nil {
		return fail(fmt.Errorf("reading link facts: %w", err))
	}
	res := reconcile.ApplySaved(s.env.Ctx, s.run(f, &out, saved.Link), saved, s.env.ConfigDir, facts)
	if res.Step == reconcile.StepStale {
		stale, _ := errors.AsType[*reconcile.StaleError](res.Err)
		s.Errorf("the saved plan %s no longer fits what it was made from; nothing was changed:", f.Saved)
		for _, c := range stale.Changes {
			fmt.Fprintf(s.env.Stderr, "  - %s\n", c)
		}
		fmt.Fprintf(s.env.Stderr, "Make a new plan with '%s FILE', review it, and apply that.\n", s.env.Invocation.Command(true, "plan", "--out"))
		return stop(exitcode.Failure, res.Err)
	}
	if code, done := s.passFailed(f, &out, res); done {
		return out.withCode(code)
	}
	return out.withCode(s.changesCode(f, res))
}

// stoppers return the two ways an apply ends early: stop with an exit
// status and the errors met, and fail, which prints err and stops with
// the status it maps to.
func (s *Invocation) stoppers(out *Outcome) (stop func(code int, errs ...error) Outcome, fail func(err error) Outcome) {
	stop = func(code int, errs ...error) Outcome {
		out.Code = code
		out.Errs = append(out.Errs, errs...)
		return *out
	}
	fail = func(err error) Outcome { return stop(s.Fail(err), err) }
	return stop, fail
}

// withCode returns the outcome with its exit status set.
func (out *Outcome) withCode(code int) Outcome {
	out.Code = code
	return *out
}

// run is how apply's reconcile (or a dry run of it) acts on link (""
// for every link): it prints the plan when it has it and records it in
// out.
func (s *Invocation) run(f Flags, out *Outcome, link string) reconcile.Run {
	in := reconcile.Run{Backend: s.backend, Store: s.tokens, Link: link, Verify: true, Do: reconcile.ApplyPlan}
	if f.DryRun {
		in.Do = reconcile.PlanOnly
	}
	in.Planned = func(o *reconcile.Outcome) {
		s.readingLive(o)
		out.Plan, out.liveUnread = o.Plan, o.Blind
		if f.JSON {
			return
		}
		fmt.Fprintln(s.env.Stderr)
		subject := fmt.Sprintf("Live %s state matches %s.", s.info.System, s.env.ConfigDir)
		if link != "" {
			subject = fmt.Sprintf("Live %s state of link %s matches %s.", s.info.System, link, s.env.ConfigDir)
		}
		opts := s.planText(f, subject)
		if blocked, ok := o.Blocked(); ok {
			// Everything is in place, but the backend never makes it
			// take effect: that is no "No changes ... matches".
			opts.NoChanges = blocked.InPlace
		} else if o.Blind {
			fmt.Fprintf(s.env.Stdout, "Note: %s\n\n", liveUnreadNote)
			opts.NoChanges = fmt.Sprintf("No policy matches the network now, so macake would own nothing in %s.", s.info.System)
		}
		plan.WriteText(s.env.Stdout, o.Plan, opts)
	}
	return in
}

// passFailed prints why a pass stopped short, records its errors in out,
// and returns the exit status and true; false when it did what it was
// asked.
func (s *Invocation) passFailed(f Flags, out *Outcome, res reconcile.Outcome) (int, bool) {
	stop := func(code int, errs ...error) (int, bool) {
		out.Errs = append(out.Errs, errs...)
		return code, true
	}
	fail := func(err error) (int, bool) { return stop(s.Fail(err), err) }
	switch res.Step {
	case reconcile.StepDesire:
		errs := reconcile.Unjoin(res.Err)
		// A link waiting for its first measurement is a step not taken
		// yet, not a broken policy: the files are valid (validate says
		// so), so it is "unavailable", as a missing tool is.
		code := exitcode.Unavailable
		for _, e := range errs {
			if !errors.Is(e, config.ErrNeedsMeasurement) {
				code = exitcode.Config
			}
		}
		if f.DryRun {
			s.Errorf("no plan: %s cannot be shaped:", english.Plural(len(errs), "link"))
		} else {
			s.Errorf("nothing was changed: %s cannot be shaped:", english.Plural(len(errs), "link"))
		}
		for _, e := range errs {
			fmt.Fprintf(s.env.Stderr, "  %v\n", e)
		}
		return stop(code, errs...)
	case reconcile.StepSlots:
		return fail(fmt.Errorf("reading the live state: %w", res.Err))
	case reconcile.StepObserve:
		s.readingLive(&res)
		return fail(fmt.Errorf("reading the live state: %w", res.Err))
	case reconcile.StepBlocked:
		// Nothing is applied when blocked: the rules would never be
		// evaluated, and macake never edits the main ruleset itself.
		s.Errorf("%v", res.Err)
		return stop(exitcode.Failure, res.Err)
	case reconcile.StepSave, reconcile.StepRelease:
		return fail(res.Err)
	}
	out.Applied = len(res.Applied.Ops) > 0
	c, u, r := res.Applied.Count()
	switch res.Step {
	case reconcile.StepApply:
		if !f.JSON {
			fmt.Fprintf(s.env.Stdout, "\nApplied: %d created, %d updated, %d removed (%.2fs), then stopped.\n", c, u, r, res.Took.Seconds())
		}
		code := s.Fail(res.Err)
		before := "The steps before it were applied."
		if len(res.Applied.Ops) == 0 {
			before = "Nothing was applied: it failed at the first step."
		}
		fmt.Fprintf(s.env.Stderr, "%s Fix the cause and run '%s' again: it continues from the live state.\n", before, s.env.Invocation.Command(true, "apply"))
		return stop(code, res.Err)
	case reconcile.StepVerify:
		return fail(res.Err)
	}
	return exitcode.OK, false
}

// changesCode prints what a successful pass applied and returns its exit
// status: 0, or 2 with --detailed-exitcode when there were changes.
func (s *Invocation) changesCode(f Flags, res reconcile.Outcome) int {
	if !f.DryRun && !res.Plan.Empty() && !f.JSON {
		c, u, r := res.Applied.Count()
		fmt.Fprintf(s.env.Stdout, "\nApplied: %d created, %d updated, %d removed (%.2fs).\n", c, u, r, res.Took.Seconds())
	}
	if f.Detailed && !res.Plan.Empty() {
		return exitcode.Changes
	}
	return exitcode.OK
}

// watchReflectors returns the reflectors a running watch probes (and so
// exempts) per link, for a dry run made while it runs: the exemptions
// follow its controllers' current reflectors, not the policy's first
// ones, and a plan against the policy's would show them as drift. A real
// apply cannot run beside watch (the lock), so it needs none.
func watchReflectors(s *Invocation) map[string][]netip.Addr {
	if !s.dryRun {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.env.Ctx, time.Second)
	defer cancel()
	st, err := statusapi.Fetch(ctx, statusapi.SocketPath(s.StateDir))
	if err != nil {
		return nil
	}
	return st.ActiveReflectors()
}

// Down removes everything macake owns (a dry run: shows what), or one
// link's shaping with f.Link, after what a killed selftest left; it
// prints the plan and what was removed.
func (s *Invocation) Down(f Flags) (out Outcome) {
	stop, _ := s.stoppers(&out)
	if code, ok := s.open(openForTeardown, nil); !ok {
		return stop(code)
	}
	s.selftestLeftovers(f.DryRun)
	do := reconcile.ApplyPlan
	if f.DryRun {
		do = reconcile.PlanOnly
	}
	subject := fmt.Sprintf("macake owns nothing in %s.", s.info.System)
	if f.Link != "" {
		subject = fmt.Sprintf("macake shapes nothing for link %s in %s.", f.Link, s.info.System)
	}
	res := reconcile.Teardown(s.env.Ctx, reconcile.Run{
		Backend: s.backend, Store: s.tokens, Do: do, Link: f.Link, Verify: f.Link != "",
		Planned: func(o *reconcile.Outcome) {
			s.readingLive(o)
			out.Plan = o.Plan
			if !f.JSON {
				fmt.Fprintln(s.env.Stderr)
				plan.WriteText(s.env.Stdout, o.Plan, s.planText(f, subject))
			}
		},
	})
	switch res.Step {
	case reconcile.StepObserve:
		s.readingLive(&res)
		err := res.Err
		return stop(s.Fail(fmt.Errorf("reading the live state: %w", err)), err)
	case reconcile.StepApply:
		code := s.Fail(res.Err)
		fmt.Fprintln(s.env.Stderr, "Run 'macake down' again once the cause is fixed; it picks up where this one stopped.")
		return stop(code, res.Err)
	case reconcile.StepRelease, reconcile.StepSave, reconcile.StepVerify:
		return stop(s.Fail(res.Err), res.Err)
	}
	if f.DryRun {
		return stop(exitcode.OK)
	}
	if err := s.tokens.NotRecorded(); err != nil {
		fmt.Fprintf(s.env.Stderr, "warning: shaping removed, but down could not record it in the state file (%v): it still names the links' slots and the pf reference, which the next apply or down corrects\n", err)
	}
	out.Plan, out.Applied = res.Plan, !res.Plan.Empty()
	if !f.JSON && !res.Plan.Empty() {
		c, u, r := res.Plan.Count()
		fmt.Fprintf(s.env.Stdout, "\nApplied: %d created, %d updated, %d removed (%.2fs).\n", c, u, r, res.Took.Seconds())
	}
	return stop(exitcode.OK)
}

// selftestLeftovers removes (or, in a dry run, names) what a killed
// selftest left, for `macake down`; it prints on stderr.
func (s *Invocation) selftestLeftovers(dryRun bool) {
	if s.env.SelftestLeftovers == nil {
		return
	}
	line, err := s.env.SelftestLeftovers(s.env.Ctx, s.StateDir, s.Policies.Settings, s.env.Getenv, dryRun)
	if err != nil {
		fmt.Fprintf(s.env.Stderr, "warning: %v\n", err)
	} else if line != "" {
		fmt.Fprintf(s.env.Stderr, "selftest: %s\n", line)
	}
}

// Switch is a measure.ShapingSwitch for when watch does not run: one-shot
// down and apply, their plans shown on stderr, as Cmd.
type Switch struct {
	Env Env
	Cmd string
}

var _ measure.ShapingSwitch = Switch{}

// run is a run of down or apply for the switch, its output on stderr.
func (o Switch) run() *Invocation {
	quiet := o.Env
	quiet.Stdout = o.Env.Stderr
	return New(quiet, o.Cmd, false)
}

// Off takes the shaping off by down; a one-shot down holds no lease.
func (o Switch) Off(context.Context, time.Duration) error {
	s := o.run()
	defer s.Close()
	if out := s.Down(Flags{}); out.Code != exitcode.OK {
		return fmt.Errorf("macake down failed (exit %d): %w", out.Code, errors.Join(out.Errs...))
	}
	return nil
}

// On puts the shaping back by apply.
func (o Switch) On(context.Context) error {
	s := o.run()
	defer s.Close()
	if out := s.ApplyOnce(Flags{}); out.Code != exitcode.OK {
		return fmt.Errorf("macake apply failed (exit %d): %w", out.Code, errors.Join(out.Errs...))
	}
	return nil
}
