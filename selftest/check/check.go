// SPDX-License-Identifier: Apache-2.0

// Package check is the machinery of `macake selftest`. A check is data: the
// fact it verifies, where that fact comes from, the calls that exercise it
// and how two answers are compared. Run makes each call on two sides, the
// real tools of this machine and the model macake's tests assume (the
// pfdntest emulator, in-process), and compares what they answered after
// the check's normalizers have replaced what legitimately differs (a pf
// token, a pid, an uptime). Checks that are not tool calls (the routing
// socket, a measurement) carry a Probe that returns its Result directly.
// Every check ends in one Result; Report renders them one line each, or as
// JSON.
package check

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/selftest/loopback"
)

// Status is how a check ended.
type Status string

// The statuses. Only OK and Skipped leave the selftest's exit status 0.
const (
	// OK: both sides answered the same (after normalising).
	OK Status = "ok"
	// Differs: the real tools answered otherwise than the model, or
	// macake could not read their answer.
	Differs Status = "differs"
	// Skipped: the check cannot run here; Detail says why.
	Skipped Status = "skipped"
	// Error: the check could not be carried out (a tool did not start or
	// timed out, a scratch object could not be recorded).
	Error Status = "error"
	// Inconclusive: a timing measurement that load on the machine can
	// disturb came out otherwise twice, in a way such load explains (a
	// shaper measured slow, or short of or beyond its queue); Detail
	// says so. It is no finding about macake, so, like Skipped, it
	// leaves the exit status 0: run the selftest again on an idle machine.
	Inconclusive Status = "inconclusive"
)

// Answer is what one call produced on one side.
type Answer struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Exit   int    `json:"exit"`
	// Err is set when the call could not be run to completion.
	Err string `json:"error,omitempty"`
}

// AnswerOf turns a Runner's result into an Answer.
func AnswerOf(res execrun.Result, err error) Answer {
	a := Answer{Stdout: string(res.Stdout), Stderr: string(res.Stderr), Exit: res.ExitCode}
	if err != nil {
		a.Err = err.Error()
	}
	return a
}

// Vars are one side's placeholder values: a call's "{pfctl}" becomes
// Vars["pfctl"]. Steps' Capture functions add to them (a pf token).
type Vars map[string]string

// Side is one of the two things a check compares.
type Side struct {
	// Name labels the side in the report: "real", "emulator".
	Name string
	// Runner answers the side's calls.
	Runner execrun.Runner
	// Vars fill the calls' placeholders.
	Vars Vars
	// Real is true for the side that is this machine.
	Real bool
}

// Call is one invocation, with {name} placeholders in its arguments and
// stdin.
type Call struct {
	Argv  []string
	Stdin string
}

var placeholder = lazyregexp.New(`\{([a-z0-9_]+)\}`)

// Expand fills c's placeholders with s's Vars. An unknown placeholder is
// an error: a value an earlier step should have captured is missing.
func (s *Side) Expand(c Call) (execrun.Command, error) {
	var missing []string
	fill := func(text string) string {
		return placeholder.ReplaceAllStringFunc(text, func(m string) string {
			name := m[1 : len(m)-1]
			v, ok := s.Vars[name]
			if !ok {
				missing = append(missing, name)
			}
			return v
		})
	}
	cmd := execrun.Command{Stdin: fill(c.Stdin)}
	for _, a := range c.Argv {
		cmd.Argv = append(cmd.Argv, fill(a))
	}
	if len(missing) > 0 {
		return cmd, fmt.Errorf("the %s side has no value for {%s}: an earlier step did not capture it", s.Name, strings.Join(missing, "}, {"))
	}
	return cmd, nil
}

// Normalizer rewrites an answer before the comparison, replacing what may
// rightly differ between the sides (a token, a pid, an uptime, other
// tools' objects) and nothing else.
type Normalizer struct {
	// Name says what it does, for the report: "pf token", "ALTQ lines".
	Name  string
	Apply func(a Answer, v Vars) Answer
}

// Step is one call made on both sides.
type Step struct {
	Call Call
	// Before, if set, runs on each side just before the call (e.g. sends
	// the traffic whose traces the call lists).
	Before func(ctx context.Context, s *Side) error
	// Normalize runs, in order, on both answers before they are compared.
	Normalize []Normalizer
	// Accept, if set, is a condition each side's raw answer must meet on
	// its own: macake's parser reads it, it names the expected pipe.
	Accept func(a Answer, s *Side) error
	// Capture, if set, reads values for later steps from a side's answer
	// into its Vars (and records scratch objects).
	Capture func(a Answer, s *Side) error
	// Quiet steps are part of the check's setup or cleanup: they are run
	// and recorded but not compared.
	Quiet bool
}

// Check is one fact the selftest verifies.
type Check struct {
	// ID is stable and short, e.g. "dnctl.rounding"; docs/DUMMYNET.md
	// lists every one.
	ID string
	// Fact is what the check verifies, one line.
	Fact string
	// Ref is where the fact comes from, e.g. "§1.7".
	Ref string
	// Needs are checks that must have ended OK for this one to mean
	// anything; otherwise it is skipped, naming them.
	Needs []string
	// Skip, if set, says why the check cannot run here ("" to run).
	Skip func() string
	// Steps are the calls, made on both sides in order. Every step runs
	// even after one differs, so both sides stay in step for the checks
	// that follow; the first difference is reported.
	Steps []Step
	// Probe replaces Steps for a check that is not a tool call: it
	// returns the Result (Status, Detail, Real, Expected) itself.
	Probe func(ctx context.Context) Result
}

// Result is one check's outcome.
type Result struct {
	ID     string `json:"id"`
	Fact   string `json:"fact"`
	Ref    string `json:"ref,omitempty"`
	Status Status `json:"status"`
	// Detail is one line: what differs, why it was skipped, the error.
	Detail string `json:"detail,omitempty"`
	// Real and Expected summarise a probe's two answers in words
	// ("19.8 Mbit/s, +20.9 ms").
	Real     string `json:"real,omitempty"`
	Expected string `json:"expected,omitempty"`
	// Steps are every call with both answers.
	Steps []StepRecord `json:"steps,omitempty"`
	// Took is how long the check ran.
	Took Duration `json:"took"`
}

// StepRecord is one call on both sides.
type StepRecord struct {
	// Call is the real side's command line, Stdin what it was fed.
	Call  string `json:"call"`
	Stdin string `json:"stdin,omitempty"`
	// Real and Expected are the raw answers.
	Real     Answer `json:"real"`
	Expected Answer `json:"expected"`
	// Normalized names the normalizers applied before comparing.
	Normalized []string `json:"normalized,omitempty"`
	// Compared is false for a quiet step (setup or cleanup).
	Compared bool `json:"compared"`
	// Same is true when the normalised answers are equal and both were
	// accepted.
	Same bool `json:"same"`
	// Problem says what is wrong when they are not.
	Problem string `json:"problem,omitempty"`
	// RealNormalized and ExpectedNormalized are what was compared, when
	// it differed.
	RealNormalized     *Answer `json:"real_normalized,omitempty"`
	ExpectedNormalized *Answer `json:"expected_normalized,omitempty"`
}

// Run runs the checks in order, each on both sides, and returns their
// results; done, if set, is called with each as it ends. When ctx ends it
// stops before the next check: the check it stopped in is skipped as
// interrupted, and the results so far are returned with interrupted true.
func Run(ctx context.Context, checks []Check, real, expected *Side, done func(Result)) (results []Result, interrupted bool) {
	status := map[string]Status{}
	for _, c := range checks {
		if ctx.Err() != nil {
			return results, true
		}
		start := time.Now()
		r := runOne(ctx, c, status, real, expected)
		r.ID, r.Fact, r.Ref, r.Took = c.ID, c.Fact, c.Ref, Duration(time.Since(start))
		if ctx.Err() != nil && r.Status != OK {
			// What failed was the interruption, not the fact.
			r.Status, r.Detail = Skipped, "interrupted"
		}
		status[c.ID] = r.Status
		results = append(results, r)
		if done != nil {
			done(r)
		}
	}
	return results, ctx.Err() != nil
}

// IDWidth is the widest check ID, for aligned report lines.
func IDWidth(checks []Check) int {
	w := 0
	for _, c := range checks {
		w = max(w, len(c.ID))
	}
	return w
}

func runOne(ctx context.Context, c Check, status map[string]Status, real, expected *Side) Result {
	var unmet []string
	for _, n := range c.Needs {
		if st := status[n]; st != OK {
			if st == "" {
				st = "not run"
			}
			unmet = append(unmet, fmt.Sprintf("%s (%s)", n, st))
		}
	}
	if len(unmet) > 0 {
		return Result{Status: Skipped, Detail: "needs " + strings.Join(unmet, ", ")}
	}
	if c.Skip != nil {
		if why := c.Skip(); why != "" {
			return Result{Status: Skipped, Detail: why}
		}
	}
	if c.Probe != nil {
		return c.Probe(ctx)
	}
	r := Result{Status: OK}
	for i, st := range c.Steps {
		rec, fatal := runStep(ctx, st, real, expected)
		r.Steps = append(r.Steps, rec)
		if r.Status != OK || rec.Problem == "" {
			continue
		}
		r.Detail = fmt.Sprintf("step %d (%s): %s", i+1, rec.Call, rec.Problem)
		switch {
		case fatal, !rec.Compared:
			// The real tool did not answer, or setup failed: nothing was
			// learnt about the fact.
			r.Status = Error
		default:
			r.Status = Differs
		}
	}
	return r
}

// runStep makes one call on both sides. fatal is true when the real side
// could not be asked at all.
func runStep(ctx context.Context, st Step, real, expected *Side) (rec StepRecord, fatal bool) {
	rec.Compared = !st.Quiet
	for _, n := range st.Normalize {
		rec.Normalized = append(rec.Normalized, n.Name)
	}
	var answers [2]Answer
	var problems []string
	for i, s := range []*Side{real, expected} {
		cmd, err := s.Expand(st.Call)
		if i == 0 {
			rec.Call, rec.Stdin = cmd.String(), cmd.Stdin
		}
		if err != nil {
			answers[i] = Answer{Err: err.Error()}
			problems = append(problems, err.Error())
			continue
		}
		if st.Before != nil {
			if err := st.Before(ctx, s); err != nil {
				problems = append(problems, fmt.Sprintf("preparing the %s side: %v", s.Name, err))
			}
		}
		a := AnswerOf(s.Runner.Run(ctx, cmd))
		answers[i] = a
		if a.Err != "" {
			continue
		}
		if st.Capture != nil {
			if err := st.Capture(a, s); err != nil {
				problems = append(problems, fmt.Sprintf("the %s answer: %v", s.Name, err))
			}
		}
		if st.Accept != nil {
			if err := st.Accept(a, s); err != nil {
				problems = append(problems, fmt.Sprintf("the %s answer: %v", s.Name, err))
			}
		}
	}
	rec.Real, rec.Expected = answers[0], answers[1]
	if answers[0].Err != "" {
		rec.Problem = "the real call did not complete: " + answers[0].Err
		return rec, true
	}
	if rec.Compared {
		rn, en := answers[0], answers[1]
		for _, n := range st.Normalize {
			rn, en = n.Apply(rn, real.Vars), n.Apply(en, expected.Vars)
		}
		if what := differences(rn, en); what != "" {
			problems = append([]string{what}, problems...)
			rec.RealNormalized, rec.ExpectedNormalized = &rn, &en
		}
	}
	rec.Problem = strings.Join(problems, "; ")
	rec.Same = rec.Compared && rec.Problem == ""
	return rec, false
}

// differences names the parts of two answers that differ, "" when none.
func differences(a, b Answer) string {
	var what []string
	if a.Stdout != b.Stdout {
		what = append(what, "stdout")
	}
	if a.Stderr != b.Stderr {
		what = append(what, "stderr")
	}
	if a.Exit != b.Exit {
		what = append(what, fmt.Sprintf("the exit status (%d, expected %d)", a.Exit, b.Exit))
	}
	if (a.Err == "") != (b.Err == "") {
		what = append(what, "whether it ran")
	}
	switch len(what) {
	case 0:
		return ""
	case 1:
		return what[0] + " differs"
	}
	return strings.Join(what[:len(what)-1], ", ") + " and " + what[len(what)-1] + " differ"
}

// Summary counts results by status.
type Summary struct {
	OK           int `json:"ok"`
	Differs      int `json:"differs"`
	Inconclusive int `json:"inconclusive,omitempty"`
	Skipped      int `json:"skipped"`
	Errors       int `json:"errors"`
}

// Summarize counts results by status.
func Summarize(results []Result) Summary {
	var s Summary
	for _, r := range results {
		switch r.Status {
		case OK:
			s.OK++
		case Differs:
			s.Differs++
		case Skipped:
			s.Skipped++
		case Inconclusive:
			s.Inconclusive++
		default:
			s.Errors++
		}
	}
	return s
}

// Measured measures a shaper and holds the measurement to what the
// shaper was given (loopback.Judge): ok within the bounds, Differs with
// the problems otherwise, both sides summarised. One measurement that
// differs is taken again, because a single TCP stream now and then loses
// its window at the wrong moment. Twice otherwise is Inconclusive, saying
// why, when the queue never filled and the rate was not beyond the pipe's:
// a sender that another process keeps from the CPU gives exactly that
// (bugreport's selftest once read 34 % of Q/R and passed a minute later),
// so it asks for another run, not a bug report. A queue that filled at
// the wrong rate, a rate beyond the pipe's or a queue beyond its size is
// the shaper's own doing, and Differs.
func Measured(ctx context.Context, measure func(context.Context) (loopback.Measurement, error), e loopback.Expectation) Result {
	var first string
	for attempt := 1; ; attempt++ {
		m, err := measure(ctx)
		if err != nil {
			return Result{Status: Error, Detail: "measuring: " + err.Error()}
		}
		v, err := loopback.Judge(m, e)
		if err != nil {
			return Result{Status: Error, Detail: err.Error()}
		}
		r := Result{Status: OK, Real: v.Measured(), Expected: v.Model()}
		if len(v.Problems) > 0 {
			r.Status, r.Detail = Differs, strings.Join(v.Problems, "; ")
		}
		switch {
		case r.Status == OK && first != "":
			r.Detail = "the first measurement differed (" + first + "), the second did not"
		case r.Status == Differs && attempt == 1 && ctx.Err() == nil:
			first = v.Measured() + ": " + r.Detail
			continue
		case r.Status == Differs && v.DelayRatio < loopback.MinDelayRatio && v.RateRatio <= loopback.MaxRateRatio:
			r.Status = Inconclusive
			r.Detail = "twice: first " + first + "; then " + r.Detail +
				". The queue never filled, which other work on this machine gives (a sender without the CPU cannot fill it); run the selftest again when the machine is idle"
		case r.Status == Differs:
			r.Detail = "twice: first " + first + "; then " + r.Detail
		}
		return r
	}
}
