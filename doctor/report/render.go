// SPDX-License-Identifier: Apache-2.0

package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// FormatVersion versions the JSON document: consumers ignore unknown fields
// within a major version and refuse another major.
const FormatVersion = "1.0"

// TextOptions tune WriteText.
type TextOptions struct {
	// Color marks the statuses with ANSI colours.
	Color bool
	// ASCII uses "+", "i", "!" and "x" instead of "✓", "i", "!" and "✗",
	// for terminals without UTF-8.
	ASCII bool
	// Verbose shows the details of lines that are ok, too.
	Verbose bool
	// Strict says that warnings fail, for the verdict.
	Strict bool
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiRed    = "\x1b[31m"
	ansiCyan   = "\x1b[36m"
)

// Marker returns the symbol that starts a line of status s.
func Marker(s Status, ascii bool) string {
	switch s {
	case OK:
		if ascii {
			return "+"
		}
		return "✓"
	case Info:
		return "i"
	case Warning:
		return "!"
	case Problem:
		if ascii {
			return "x"
		}
		return "✗"
	}
	return "-"
}

func colorOf(s Status) string {
	switch s {
	case OK:
		return ansiGreen
	case Info:
		return ansiCyan
	case Warning:
		return ansiYellow
	case Problem:
		return ansiRed
	}
	return ""
}

// WriteText prints the report for people: the lines by section, each
// non-ok line with its details and fix, then the verdict. Skipped checks
// are left out: the line they depend on says why.
func WriteText(w io.Writer, rep Report, o TextOptions) {
	paint := func(code, s string) string {
		if !o.Color || code == "" {
			return s
		}
		return code + s + ansiReset
	}
	section := ""
	for _, r := range rep.Results {
		if r.Status == Skipped {
			continue
		}
		if r.Section != section {
			if section != "" {
				fmt.Fprintln(w)
			}
			section = r.Section
			fmt.Fprintln(w, paint(ansiBold, section))
		}
		fmt.Fprintf(w, "  %s %s: %s\n", paint(colorOf(r.Status), Marker(r.Status, o.ASCII)), r.Name, r.Message)
		if r.Status != OK && r.Status != Info || o.Verbose {
			for _, d := range r.Details {
				fmt.Fprintf(w, "      %s\n", d)
			}
		}
		if r.Fix != "" {
			lines := strings.Split(r.Fix, "\n")
			fmt.Fprintf(w, "      %s %s\n", paint(ansiBold, "fix:"), lines[0])
			for _, l := range lines[1:] {
				fmt.Fprintf(w, "          %s\n", l)
			}
		}
	}
	if section != "" {
		fmt.Fprintln(w)
	}
	verdict := rep.Verdict()
	n := rep.Counts()
	if o.Strict && n[Problem] == 0 && n[Warning] > 0 {
		verdict += " With --strict, warnings fail."
	}
	fmt.Fprintln(w, verdict)
}

// jsonReport is the --json document.
type jsonReport struct {
	FormatVersion string      `json:"format_version"`
	Strict        bool        `json:"strict"`
	Root          bool        `json:"root"`
	Summary       jsonSummary `json:"summary"`
	Verdict       string      `json:"verdict"`
	Failed        bool        `json:"failed"`
	Checks        []Result    `json:"checks"`
}

type jsonSummary struct {
	OK       int `json:"ok"`
	Info     int `json:"info"`
	Warnings int `json:"warnings"`
	Problems int `json:"problems"`
	Skipped  int `json:"skipped"`
}

// WriteJSON prints the report as one versioned JSON document.
func WriteJSON(w io.Writer, rep Report, strict, root bool) error {
	n := rep.Counts()
	checks := rep.Results
	if checks == nil {
		checks = []Result{}
	}
	doc := jsonReport{
		FormatVersion: FormatVersion, Strict: strict, Root: root,
		Summary: jsonSummary{OK: n[OK], Info: n[Info], Warnings: n[Warning], Problems: n[Problem], Skipped: n[Skipped]},
		Verdict: rep.Verdict(), Failed: rep.Failed(strict), Checks: checks,
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
