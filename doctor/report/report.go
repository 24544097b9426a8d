// SPDX-License-Identifier: Apache-2.0

// Package report is what `macake doctor` reports: each check's Result, the
// Report of them all with its verdict, and the report printed for people
// (WriteText) and as a versioned JSON document (WriteJSON). The checks
// themselves, and what they inspect, are package doctor's.
package report

import (
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
	if s >= OK && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", int(s))
}

var statusNames = [...]string{OK: "ok", Info: "info", Warning: "warning", Problem: "problem", Skipped: "skipped"}

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

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

// With returns r with details added.
func (r Result) With(details ...string) Result {
	r.Details = append(r.Details, details...)
	return r
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
