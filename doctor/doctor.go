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

	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/internal/english"
)

// Sections group the checks in the text output, in this order.
const (
	SectionSystem  = "System"
	SectionPF      = "pf and dummynet"
	SectionTC      = "tc"
	SectionNetwork = "Network"
	SectionConfig  = "Configuration"
	SectionDaemon  = "Daemon"
)

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
	Run func(ctx context.Context, in *Inspection) report.Result
}

// Run runs every check that applies, in order.
func Run(ctx context.Context, in *Inspection, checks []Check) report.Report {
	in.prefetch(ctx)
	var rep report.Report
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
func ok(format string, args ...any) report.Result {
	return report.Result{Status: report.OK, Message: fmt.Sprintf(format, args...)}
}

func info(format string, args ...any) report.Result {
	return report.Result{Status: report.Info, Message: fmt.Sprintf(format, args...)}
}

func warn(fix, format string, args ...any) report.Result {
	return report.Result{Status: report.Warning, Message: fmt.Sprintf(format, args...), Fix: fix}
}

func problem(fix, format string, args ...any) report.Result {
	return report.Result{Status: report.Problem, Message: fmt.Sprintf(format, args...), Fix: fix}
}

func skipped(format string, args ...any) report.Result {
	return report.Result{Status: report.Skipped, Message: fmt.Sprintf(format, args...)}
}

// needsRoot is the warning of a check that cannot look without root:
// message says what could not be read, what what the fix would check.
func needsRoot(message, what string) report.Result {
	r := warn("run with sudo to check "+what, "%s", message)
	r.NeedsRoot = true
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

// oneOrMany is the word that agrees with n things: one for one, else many
// ("is" or "are", "its" or "their").
func oneOrMany(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
