// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/docsite"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/session"
	"github.com/macake/macake/state"
)

var applyCmd = &command{
	name:  "apply",
	args:  "[--dry-run [--out FILE]] [--link NAME] [--detailed-exitcode] [--show-commands] [--json] [--color auto|always|never] [FILE]",
	short: "Reconcile pf and dummynet (Linux: tc) with the policy files once; print the plan, then what was applied.",
	long: `Reads every policy file in the config directory, works out which policy is
active on which interface now (see 'macake links'), reads the live pf anchor
and dummynet pipes, prints the plan that makes them match, and applies it in a
safe order. Only what macake owns is ever changed: its pf anchor, the pipes in
its range that its state file or its anchor proves it made (other pipes there
are left alone with a warning) and its own pf enable reference. 'macake plan' is 'apply --dry-run'.

On Linux the same policies drive tc instead (MACAKE_BACKEND=pf|tc picks
one): macake's root qdiscs, its ingress filters and its ifb-macake* devices
(see ` + docsite.Page("LINUX.md", "") + `).

Each active link starts at its policy's rate (or the last rate the state file
knows to be good on that network); 'macake watch' then steers it.

Reviewed plans, as terraform does them: 'macake plan --out FILE' saves the
plan with fingerprints of what it was made from (the policy files and
macake.toml, the network of the interfaces they name, the state file's
pipe slots and the live state); 'macake apply FILE' applies exactly that
plan, and refuses (exit 1, saying what changed, changing nothing) if any
of it changed since ('apply --dry-run FILE' only checks and shows it).
--link NAME acts on one link alone: only its pipes
and rules change, every other link's live shaping stays as it is, and
other policies' problems do not stop it.

If any policy file or the daemon settings are invalid, apply changes nothing
and exits 78 with every problem listed, so a broken file never tears down
shaping that works. If pf's main ruleset has lost the
'dummynet-anchor "com.apple/*"' line, apply prints the line to add and
exits 1 without changing anything.

On macOS, reading pf and dummynet needs root, even for a dry run. Without
root a dry run cannot see what is live, so it says so and shows everything
macake would own for the links that match now (run it with sudo to see
only the differences); apply itself needs root.

Exit status: 0 success (with or without changes); 1 failure, including an
apply that stopped part-way (run apply again to continue from the live
state) and a saved plan that no longer fits; 2 only with --detailed-exitcode, when there were changes (planned in a
dry run, applied otherwise); 64 usage; 69 pfctl/dnctl (Linux: tc/ip) missing or unusable,
or a link's "auto" rates wait for 'macake measure' on this network; 77 not root
(except a dry run); 78 configuration invalid.`,
}

func init() { applyCmd.run = runApply }

// planCmd is `apply --dry-run` under the name terraform users type. It is
// a command of its own, so that it is listed and its help names it.
var planCmd = &command{
	name:  "plan",
	args:  "[--out FILE] [--link NAME] [--detailed-exitcode] [--show-commands] [--json] [--color auto|always|never]",
	short: "Print the plan that 'macake apply' would carry out, and change nothing ('apply --dry-run').",
	long: `The same as 'macake apply --dry-run': reads the policy files, the state file
and the live shaping, and prints the plan that makes them match, without
changing anything or taking the lock. On macOS, reading pf and dummynet
needs root; without it the plan is everything macake would own for the
links that match now (it says so). See 'macake apply --help' for the plan's
format. --out FILE saves the plan, with fingerprints of what it was made
from, for 'macake apply FILE' to apply exactly that plan once reviewed
(saving needs the live state: on macOS, root); --link NAME plans for one
link alone.

Exit status: 0 success (with or without changes); 1 failure; 2 only with
--detailed-exitcode, when there are changes; 64 usage; 69 pfctl/dnctl
(Linux: tc/ip) missing or unusable, or a link's "auto" rates wait for
'macake measure' on this network; 78 configuration invalid.`,
}

func init() {
	planCmd.run = func(e *env, args []string) int {
		e.invokedAs = planCmd
		return runApply(e, append([]string{"--dry-run"}, args...))
	}
}

// backendRunner, when not nil, runs the backend's commands instead of real
// processes: the CLI tests set it to the in-process pf/dummynet emulator.
var backendRunner execrun.Runner

// lockWait is how long a mutating command waits for another one.
var lockWait = state.DefaultLockWait

// applyFlags are apply's flags.
type applyFlags struct {
	dryRun, detailed, showCommands, json bool
	color                                colorMode
	// out saves the plan of a dry run; link scopes to one link; saved is
	// a saved plan to apply.
	out, link, saved string
}

func runApply(e *env, args []string) int {
	cmd := applyCmd
	if e.invokedAs != nil {
		cmd = e.invokedAs
	}
	fs := cmd.flags()
	f := applyFlags{color: "auto"}
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the plan only; change nothing (without root on macOS: everything macake would own, as the live state is unreadable)")
	fs.BoolVar(&f.detailed, "detailed-exitcode", false, "exit 2 when there were changes (planned or applied)")
	fs.BoolVar(&f.showCommands, "show-commands", false, "print every pfctl/dnctl (Linux: tc/ip) command of the plan")
	fs.BoolVar(&f.json, "json", false, "print one JSON document (the plan and its outcome) instead of text")
	fs.Var(&f.color, "color", "colour the plan: auto (only on a terminal, without NO_COLOR), always or never")
	fs.StringVar(&f.out, "out", "", "with --dry-run (macake plan): save the plan to `FILE`, for 'macake apply FILE' to apply exactly that plan once reviewed")
	fs.StringVar(&f.link, "link", "", "act on the link `NAME` (links.d/NAME.toml) alone; every other link's shaping stays as it is")
	if done, code := cmd.parse(e, fs, args); done {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(e.stderr, "macake %s: one saved plan FILE at most, not %q\n", cmd.name, fs.Args())
		return exitUsage
	}
	f.saved = fs.Arg(0)
	switch {
	case cmd == planCmd && f.saved != "":
		fmt.Fprintf(e.stderr, "macake plan: unexpected argument %q (to save the plan: macake plan --out %s)\n", f.saved, f.saved)
		return exitUsage
	case f.out != "" && !f.dryRun:
		fmt.Fprintln(e.stderr, "macake apply: --out saves a plan without applying it: run 'macake plan --out FILE'")
		return exitUsage
	case f.saved != "" && (f.out != "" || f.link != ""):
		fmt.Fprintf(e.stderr, "macake %s: a saved plan is applied as it was made (its --link with it): FILE takes no --out or --link\n", cmd.name)
		return exitUsage
	}
	if !f.dryRun {
		if ok, code := e.requireRoot("apply"); !ok {
			return code
		}
	}
	s := &invocation{e: e, cmd: cmd.name, dryRun: f.dryRun, unreadablePlan: f.dryRun}
	defer s.close()
	return s.apply(f)
}

// invocation is one run of a command that reads, and maybe changes, the live
// shaping state: the configuration, the state file, the lock and the backend.
type invocation struct {
	e      *env
	cmd    string
	dryRun bool
	// unreadablePlan lets a dry run that may not read the live state plan
	// without it (mayPlanUnread).
	unreadablePlan bool

	backendName string
	policies    settings.Policies
	stateDir    string
	opened      *session.Session
	tokens      *state.File
	backend     backend.Backend
	info        backend.Info
}

func (s *invocation) close() { s.opened.Close() }

// errorf prints "macake CMD: message" on stderr.
func (s *invocation) errorf(format string, args ...any) {
	fmt.Fprintf(s.e.stderr, "macake %s: %s\n", s.cmd, fmt.Sprintf(format, args...))
}

// fail prints err and returns the exit status it maps to.
func (s *invocation) fail(err error) int {
	s.errorf("%v", err)
	switch {
	case backend.Unavailable(err):
		if s.e.euid() != 0 && errors.Is(err, backend.ErrNeedsRoot) {
			fmt.Fprintf(s.e.stderr, "Reading pf and dummynet needs root, even for a dry run. Run with sudo.\n")
		}
		return exitUnavailable
	case errors.Is(err, config.ErrNeedsMeasurement):
		return exitUnavailable
	}
	return exitFailure
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
func (s *invocation) open(what opening, onProblems func(problems []*config.Problem)) (int, bool) {
	e := s.e
	o := session.Options{
		ConfigDir: e.configDir, StateDir: e.stateDir, StateDirIsDefault: e.stateDir == defaultStateDir,
		Policies: what == openForApply, StopAtProblems: true, NoState: what == openSettings, NoBackend: what == openSettings,
		SkipOwnershipCheck: e.euid() != 0, Getenv: e.getenv, Runner: backendRunner,
	}
	if !s.dryRun && what != openSettings {
		o.Lock = &state.LockOptions{Wait: lockWait, SkipOwnershipCheck: e.euid() != 0, MayCreate: e.stateDir == defaultStateDir,
			Unrecorded: what == openForTeardown}
	}
	ses, err := session.Open(e.ctx, o)
	s.opened, s.backendName, s.policies, s.stateDir = ses, ses.BackendName, ses.Policies, ses.StateDir
	if session.StepOf(err) == session.StepChoose {
		if backend.Unavailable(err) {
			return s.fail(err), false
		}
		s.errorf("%v", err)
		return exitUsage, false
	}
	for _, w := range ses.Policies.Warnings {
		fmt.Fprintln(e.stderr, w.String())
	}
	switch step := session.StepOf(err); {
	case step == session.StepSettings:
		for _, pr := range config.Problems(err) {
			fmt.Fprintln(e.stderr, pr.Error())
		}
		s.errorf("the daemon settings are invalid; nothing was changed (they name the anchor and pipe range macake owns)")
		return exitConfig, false
	case step == session.StepPolicies:
		problems := config.Problems(err)
		fmt.Fprintf(e.stderr, "Reading policy files in %s … failed\n", e.configDir)
		for _, pr := range problems {
			fmt.Fprintln(e.stderr, pr.Error())
		}
		s.errorf("%s: nothing was changed, so shaping that works stays as it is; fix the files (see '%s') and run it again", plural(len(problems), "configuration problem"), e.invocation().Command(false, "validate"))
		if onProblems != nil {
			onProblems(problems)
		}
		return exitConfig, false
	case what == openForApply:
		fmt.Fprintf(e.stderr, "Reading %s in %s … ok\n", plural(len(ses.Policies.Links), "file"), e.configDir)
		if len(ses.Policies.Links) == 0 {
			fmt.Fprintf(e.stderr, "warning: no policy files (*.toml) in %s: nothing is to be shaped, so everything macake shapes now is removed\n", e.configDir)
		}
	}
	if session.StepOf(err) == session.StepLock {
		return s.fail(err), false
	}
	if err := ses.Lock.Unrecorded(); err != nil {
		fmt.Fprintf(e.stderr, "warning: the state directory %s takes no write (%v): going on without recording anything there\n", ses.StateDir, err)
	}
	if ses.PruneErr != nil {
		fmt.Fprintf(e.stderr, "warning: %v\n", ses.PruneErr)
	}
	switch {
	case errors.Is(ses.StateErr, state.ErrCorrupt):
		fmt.Fprintf(e.stderr, "warning: %v\n", ses.StateErr)
		switch {
		case s.dryRun:
		case ses.AsideErr == nil:
			fmt.Fprintf(e.stderr, "warning: a copy of the corrupt state file is kept in %s\n", ses.Aside)
		default:
			fmt.Fprintf(e.stderr, "warning: %v\n", ses.AsideErr)
		}
	case session.StepOf(err) == session.StepState:
		return s.fail(err), false
	case ses.StateErr != nil:
		fmt.Fprintf(e.stderr, "warning: %v; planning as if it were empty\n", ses.StateErr)
	}
	if err != nil {
		return s.fail(err), false
	}
	s.tokens, s.backend = ses.State, ses.Backend
	if s.backend != nil {
		s.info = s.backend.Info()
	}
	return exitOK, true
}

// readingLive prints the progress line `Reading live state (SCOPE) … ok`
// for a pass that read (or tried to read) the live state.
func (s *invocation) readingLive(out *reconcile.Outcome) {
	result := "ok"
	switch {
	case out.Blind:
		result = "not read: it needs root"
	case out.Step == reconcile.StepObserve:
		result = "failed"
	}
	fmt.Fprintf(s.e.stderr, "Reading live state (%s) … %s\n", s.info.Scope, result)
}

// applyOutcome is what apply reports: the plan, whether any of it was
// applied, the errors met, and the exit status.
type applyOutcome struct {
	plan    plan.Plan
	applied bool
	errs    []error
	code    int
	// liveUnread: the plan is everything macake would own, made without
	// reading the live state (a dry run without root).
	liveUnread bool
}

// liveUnreadNote qualifies a plan made without reading the live state.
const liveUnreadNote = "The live state cannot be read without root, so this is everything macake would own for the links that match now, not the difference from what is live. Run it with sudo to see only the differences."

func (s *invocation) apply(f applyFlags) int {
	var out applyOutcome
	if f.saved != "" {
		out = s.applySaved(f)
	} else {
		out = s.applyOnce(f)
	}
	if f.json {
		doc := plan.Document(out.plan, f.dryRun, out.applied, out.errs)
		if out.liveUnread {
			doc.LiveStateNotRead, doc.Note = true, liveUnreadNote
		}
		plan.WriteDocument(s.e.stdout, doc)
	}
	return out.code
}

// planText are the plan's text options for this invocation.
func (s *invocation) planText(f applyFlags, subject string) plan.TextOptions {
	return plan.TextOptions{
		Color: s.e.useColor(f.color, s.e.stdout), ShowCommands: f.showCommands, DryRun: f.dryRun, Symbols: true,
		SharedGroup: s.info.SharedGroup, Subject: subject,
	}
}

func (s *invocation) applyOnce(f applyFlags) (out applyOutcome) {
	stop, fail := s.stoppers(&out)

	var prints map[string]string
	if f.out != "" {
		// Before loading: a file that changes in between makes the saved
		// plan refuse to apply, never apply what nobody reviewed.
		var err error
		if prints, err = reconcile.PolicyFingerprints(s.e.configDir); err != nil {
			return fail(err)
		}
	}
	if code, ok := s.open(openForApply, func(problems []*config.Problem) {
		for _, p := range problems {
			out.errs = append(out.errs, p)
		}
	}); !ok {
		return stop(code)
	}
	facts, err := linkfacts.Read(s.e.ctx, s.e.getenv)
	if err != nil {
		return fail(fmt.Errorf("reading link facts: %w", err))
	}
	in := reconcile.PassInput{
		Run:   s.run(f, &out, f.link),
		Links: s.policies.Links, Facts: facts,
		Inputs: desired.Inputs{State: s.tokens.State, MTU: reconcile.PolicyMTUs(s.policies.Links), Reflectors: watchReflectors(s),
			Invocation: s.e.invocation()},
		// A dry run that may not read the live state plans without it:
		// the backend refused a caller who is not root (pf and dummynet
		// on macOS). A plan to save must have read it.
		Blind: s.unreadablePlan && s.e.euid() != 0 && f.out == "",
	}
	res := reconcile.Pass(s.e.ctx, in)
	if code, done := s.passFailed(f, &out, res); done {
		return out.withCode(code)
	}
	if f.out != "" {
		sp, err := reconcile.NewSavedPlan(&res, in, s.backendName, s.e.configDir, prints, time.Now())
		if err == nil {
			err = sp.Write(f.out)
		}
		if err != nil {
			return fail(fmt.Errorf("saving the plan to %s: %w", f.out, err))
		}
		if !f.json {
			fmt.Fprintf(s.e.stdout, "\nSaved the plan to %s. To apply exactly this plan, run:\n  %s\n", f.out, s.e.invocation().Command(true, "apply", f.out))
		}
	}
	return out.withCode(s.changesCode(f, res))
}

// applySaved applies a saved plan (macake apply FILE): it reads the file,
// the daemon settings (not the policies: their fingerprints stand for
// them), the state and the network, and runs the pass that checks and
// applies it.
func (s *invocation) applySaved(f applyFlags) (out applyOutcome) {
	stop, fail := s.stoppers(&out)
	saved, err := reconcile.ReadSavedPlan(f.saved)
	if err != nil {
		return fail(err)
	}
	scope := ""
	if saved.Link != "" {
		scope = ", for link " + saved.Link + " alone"
	}
	fmt.Fprintf(s.e.stderr, "Reading saved plan %s (made %s%s) … ok\n", f.saved, saved.Made.Local().Format(time.DateTime), scope)
	if code, ok := s.open(openForDown, nil); !ok {
		return stop(code)
	}
	facts, err := linkfacts.Read(s.e.ctx, s.e.getenv)
	if err != nil {
		return fail(fmt.Errorf("reading link facts: %w", err))
	}
	res := reconcile.ApplySaved(s.e.ctx, s.run(f, &out, saved.Link), saved, s.e.configDir, facts)
	if res.Step == reconcile.StepStale {
		stale, _ := errors.AsType[*reconcile.StaleError](res.Err)
		s.errorf("the saved plan %s no longer fits what it was made from; nothing was changed:", f.saved)
		for _, c := range stale.Changes {
			fmt.Fprintf(s.e.stderr, "  - %s\n", c)
		}
		fmt.Fprintf(s.e.stderr, "Make a new plan with '%s FILE', review it, and apply that.\n", s.e.invocation().Command(true, "plan", "--out"))
		return stop(exitFailure, res.Err)
	}
	if code, done := s.passFailed(f, &out, res); done {
		return out.withCode(code)
	}
	return out.withCode(s.changesCode(f, res))
}

// stoppers return the two ways an apply ends early: stop with an exit
// status and the errors met, and fail, which prints err and stops with
// the status it maps to.
func (s *invocation) stoppers(out *applyOutcome) (stop func(code int, errs ...error) applyOutcome, fail func(err error) applyOutcome) {
	stop = func(code int, errs ...error) applyOutcome {
		out.code = code
		out.errs = append(out.errs, errs...)
		return *out
	}
	fail = func(err error) applyOutcome { return stop(s.fail(err), err) }
	return stop, fail
}

// withCode returns the outcome with its exit status set.
func (out *applyOutcome) withCode(code int) applyOutcome {
	out.code = code
	return *out
}

// run is how apply's reconcile (or a dry run of it) acts on link (""
// for every link): it prints the plan when it has it and records it in
// out.
func (s *invocation) run(f applyFlags, out *applyOutcome, link string) reconcile.Run {
	in := reconcile.Run{Backend: s.backend, Store: s.tokens, Link: link, Verify: true, Do: reconcile.ApplyPlan}
	if f.dryRun {
		in.Do = reconcile.PlanOnly
	}
	in.Planned = func(o *reconcile.Outcome) {
		s.readingLive(o)
		out.plan, out.liveUnread = o.Plan, o.Blind
		if f.json {
			return
		}
		fmt.Fprintln(s.e.stderr)
		subject := fmt.Sprintf("Live %s state matches %s.", s.info.System, s.e.configDir)
		if link != "" {
			subject = fmt.Sprintf("Live %s state of link %s matches %s.", s.info.System, link, s.e.configDir)
		}
		opts := s.planText(f, subject)
		if blocked, ok := o.Blocked(); ok {
			// Everything is in place, but the backend never makes it
			// take effect: that is no "No changes ... matches".
			opts.NoChanges = blocked.InPlace
		} else if o.Blind {
			fmt.Fprintf(s.e.stdout, "Note: %s\n\n", liveUnreadNote)
			opts.NoChanges = fmt.Sprintf("No policy matches the network now, so macake would own nothing in %s.", s.info.System)
		}
		plan.WriteText(s.e.stdout, o.Plan, opts)
	}
	return in
}

// passFailed prints why a pass stopped short, records its errors in out,
// and returns the exit status and true; false when it did what it was
// asked.
func (s *invocation) passFailed(f applyFlags, out *applyOutcome, res reconcile.Outcome) (int, bool) {
	stop := func(code int, errs ...error) (int, bool) {
		out.errs = append(out.errs, errs...)
		return code, true
	}
	fail := func(err error) (int, bool) { return stop(s.fail(err), err) }
	switch res.Step {
	case reconcile.StepDesire:
		errs := reconcile.Unjoin(res.Err)
		// A link waiting for its first measurement is a step not taken
		// yet, not a broken policy: the files are valid (validate says
		// so), so it is "unavailable", as a missing tool is.
		code := exitUnavailable
		for _, e := range errs {
			if !errors.Is(e, config.ErrNeedsMeasurement) {
				code = exitConfig
			}
		}
		if f.dryRun {
			s.errorf("no plan: %s cannot be shaped:", plural(len(errs), "link"))
		} else {
			s.errorf("nothing was changed: %s cannot be shaped:", plural(len(errs), "link"))
		}
		for _, e := range errs {
			fmt.Fprintf(s.e.stderr, "  %v\n", e)
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
		s.errorf("%v", res.Err)
		return stop(exitFailure, res.Err)
	case reconcile.StepSave, reconcile.StepRelease:
		return fail(res.Err)
	}
	out.applied = len(res.Applied.Ops) > 0
	c, u, r := res.Applied.Count()
	switch res.Step {
	case reconcile.StepApply:
		if !f.json {
			fmt.Fprintf(s.e.stdout, "\nApplied: %d created, %d updated, %d removed (%.2fs), then stopped.\n", c, u, r, res.Took.Seconds())
		}
		code := s.fail(res.Err)
		before := "The steps before it were applied."
		if len(res.Applied.Ops) == 0 {
			before = "Nothing was applied: it failed at the first step."
		}
		fmt.Fprintf(s.e.stderr, "%s Fix the cause and run '%s' again: it continues from the live state.\n", before, s.e.invocation().Command(true, "apply"))
		return stop(code, res.Err)
	case reconcile.StepVerify:
		return fail(res.Err)
	}
	return exitOK, false
}

// changesCode prints what a successful pass applied and returns its exit
// status: 0, or 2 with --detailed-exitcode when there were changes.
func (s *invocation) changesCode(f applyFlags, res reconcile.Outcome) int {
	if !f.dryRun && !res.Plan.Empty() && !f.json {
		c, u, r := res.Applied.Count()
		fmt.Fprintf(s.e.stdout, "\nApplied: %d created, %d updated, %d removed (%.2fs).\n", c, u, r, res.Took.Seconds())
	}
	if f.detailed && !res.Plan.Empty() {
		return exitChanges
	}
	return exitOK
}

// watchReflectors returns the reflectors a running watch probes (and so
// exempts) per link, for a dry run made while it runs: the exemptions
// follow its controllers' current reflectors, not the policy's first
// ones, and a plan against the policy's would show them as drift. A real
// apply cannot run beside watch (the lock), so it needs none.
func watchReflectors(s *invocation) map[string][]netip.Addr {
	if !s.dryRun {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.e.ctx, time.Second)
	defer cancel()
	st, err := statusapi.Fetch(ctx, statusapi.SocketPath(s.stateDir))
	if err != nil {
		return nil
	}
	return st.ActiveReflectors()
}
