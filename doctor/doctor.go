// SPDX-License-Identifier: Apache-2.0

// Package doctor is `macake doctor`: health checks of the machine macake runs
// on, each ending as one line marked ok, info, warning or problem, with the
// fix for every line that is not ok.
//
// The checks are data (Checks): an ID, a section, a name, when they apply and
// a function. Each function reads what it inspects through an Inspection,
// which gathers every fact once, through the small seams of System (a
// execrun.Runner for pfctl/dnctl/tc/launchctl, a file system, the link facts,
// an ICMP socket opener, a pinger, a counter reader, the state lock, the
// daemon's status socket), so tests run every check against fakes or the
// pf/dummynet emulator. The verdicts themselves are pure functions of those
// facts.
//
// Doctor never changes anything: it runs only read-only pfctl/dnctl/tc/
// launchctl invocations, and it never needs root. A check that cannot look
// without root says so as a warning ("run with sudo to check …"), not as a
// problem.
package doctor

import (
	"context"
	"fmt"

	"github.com/macake/macake/internal/english"
)

// Status is a check's outcome.
type Status int

// The statuses, from best to worst. Info lines state a fact without judging
// it; only warnings and problems count in the verdict.
const (
	OK Status = iota
	Info
	Warning
	Problem
	// Skipped marks a check that did not run because a check it depends on
	// failed (that one's line says why); it is listed in JSON only.
	Skipped
)

// String returns "ok", "info", "warning", "problem" or "skipped", the words
// of the JSON document.
func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Problem:
		return "problem"
	case Skipped:
		return "skipped"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Sections group the checks in the text output, in this order.
const (
	SectionSystem  = "System"
	SectionPF      = "pf and dummynet"
	SectionTC      = "tc"
	SectionNetwork = "Network"
	SectionConfig  = "Configuration"
	SectionDaemon  = "Daemon"
)

// Result is one check's outcome: one line of the report.
type Result struct {
	// ID is the check's stable identifier, e.g. "pf.hook".
	ID string `json:"id"`
	// Section and Name place and title the line.
	Section string `json:"section"`
	Name    string `json:"name"`
	Status  Status `json:"status"`
	// Message says what was found, in one sentence.
	Message string `json:"message"`
	// Details are further lines (lists of pipes, the kernel's qdiscs, …).
	Details []string `json:"details,omitempty"`
	// Fix says what to do; set on every warning and problem.
	Fix string `json:"fix,omitempty"`
	// NeedsRoot is set when the check could not look without root.
	NeedsRoot bool `json:"needs_root,omitempty"`
}

// Check is one health check as data.
type Check struct {
	ID      string
	Section string
	Name    string
	// Applies tells whether the check is relevant on this machine (the pf
	// checks only for the pf backend); nil means always.
	Applies func(in *Inspection) bool
	// Run inspects and judges. It fills Status, Message, Details, Fix and
	// NeedsRoot; the rest comes from the Check.
	Run func(ctx context.Context, in *Inspection) Result
}

// Report is the outcome of every applicable check, in order.
type Report struct {
	Results []Result
}

// Counts returns how many results have each status.
func (r Report) Counts() map[Status]int {
	n := map[Status]int{}
	for _, res := range r.Results {
		n[res.Status]++
	}
	return n
}

// Verdict is the closing line: "Everything looks fine." when there is no
// warning and no problem, otherwise "N problems, M warnings.".
func (r Report) Verdict() string {
	n := r.Counts()
	if n[Problem] == 0 && n[Warning] == 0 {
		return "Everything looks fine."
	}
	return fmt.Sprintf("%s, %s.", english.Plural(n[Problem], "problem"), english.Plural(n[Warning], "warning"))
}

// Failed reports whether the report fails: any problem, or with strict any
// warning too.
func (r Report) Failed(strict bool) bool {
	n := r.Counts()
	return n[Problem] > 0 || strict && n[Warning] > 0
}

// Run runs every check that applies, in order.
func Run(ctx context.Context, in *Inspection, checks []Check) Report {
	in.prefetch(ctx)
	var rep Report
	for _, c := range checks {
		if c.Applies != nil && !c.Applies(in) {
			continue
		}
		res := c.Run(ctx, in)
		res.ID, res.Section, res.Name = c.ID, c.Section, c.Name
		rep.Results = append(rep.Results, res)
	}
	return rep
}

// ok, info, warn, problem and skipped build results.
func ok(format string, args ...any) Result {
	return Result{Status: OK, Message: fmt.Sprintf(format, args...)}
}

func info(format string, args ...any) Result {
	return Result{Status: Info, Message: fmt.Sprintf(format, args...)}
}

func warn(fix, format string, args ...any) Result {
	return Result{Status: Warning, Message: fmt.Sprintf(format, args...), Fix: fix}
}

func problem(fix, format string, args ...any) Result {
	return Result{Status: Problem, Message: fmt.Sprintf(format, args...), Fix: fix}
}

func skipped(format string, args ...any) Result {
	return Result{Status: Skipped, Message: fmt.Sprintf(format, args...)}
}

// needsRoot is the warning of a check that cannot look without root:
// message says what could not be read, what what the fix would check.
func needsRoot(message, what string) Result {
	r := warn("run with sudo to check "+what, "%s", message)
	r.NeedsRoot = true
	return r
}

// with returns r with details added.
func (r Result) with(details ...string) Result {
	r.Details = append(r.Details, details...)
	return r
}

// joinInts renders a list of numbers, at most max of them, e.g.
// "40269, 40270" or "1, 2, 3 and 7 more".
func joinInts(ns []int, max int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return english.Join(s, max)
}
