// SPDX-License-Identifier: Apache-2.0

package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/macake/macake/internal/english"
)

// Report is one whole selftest run.
type Report struct {
	// Suite is what was tested: "pf/dummynet" or "tc".
	Suite string `json:"suite"`
	// Real describes the real side (the tools, the OS); Expected the
	// model it was compared with.
	Real     string `json:"real"`
	Expected string `json:"expected"`
	// Host is the machine.
	Host Host `json:"host"`
	// Setup lists what was done before the checks (leftovers removed,
	// other tools' state mirrored into the model).
	Setup []string `json:"setup,omitempty"`
	// Results are the checks, in the order they ran.
	Results []Result `json:"checks"`
	// Labels is where the checks' labels (Ref) are explained: a page of
	// the documentation, for a user who has only the binary.
	Labels string `json:"labels,omitempty"`
	// Cleanup lists what was removed at the end; CleanupErrors what could
	// not be (the next selftest or `macake down` retries).
	Cleanup       []string `json:"cleanup,omitempty"`
	CleanupErrors []string `json:"cleanup_errors,omitempty"`
	// Interrupted is true when a signal stopped the run before every
	// check had run.
	Interrupted bool      `json:"interrupted,omitempty"`
	Summary     Summary   `json:"summary"`
	Started     time.Time `json:"started"`
	Took        Duration  `json:"took"`
}

// Host describes the machine the selftest ran on.
type Host struct {
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	Version string `json:"version,omitempty"`
	Macake  string `json:"macake,omitempty"`
	Go      string `json:"go,omitempty"`
}

// Duration marshals as text ("1.5s").
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).Round(time.Millisecond).String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// OK reports whether everything matched: no check differs or failed, the
// run was not interrupted and the cleanup removed everything.
func (r *Report) OK() bool {
	s := Summarize(r.Results)
	return s.Differs == 0 && s.Errors == 0 && !r.Interrupted && len(r.CleanupErrors) == 0
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	r.Summary = Summarize(r.Results)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// maxDiffLines bounds how many differing lines a text report shows per
// stream; --json has them all.
const maxDiffLines = 8

// WriteText writes the report for people: a header, one line per check
// (differences with the real and the expected bytes one above the other),
// the cleanup and a summary. WriteHeader, WriteResult and WriteFooter are
// its parts, for printing each check as it ends.
func (r *Report) WriteText(w io.Writer) {
	r.WriteHeader(w)
	width := 0
	for _, res := range r.Results {
		width = max(width, len(res.ID))
	}
	for _, res := range r.Results {
		WriteResult(w, res, width)
	}
	r.WriteFooter(w)
}

// WriteHeader writes what was compared with what, and the setup.
func (r *Report) WriteHeader(w io.Writer) {
	fmt.Fprintf(w, "macake selftest: %s\n", r.Suite)
	fmt.Fprintf(w, "  real:     %s\n", r.Real)
	fmt.Fprintf(w, "  expected: %s\n", r.Expected)
	for i, s := range r.Setup {
		label := "  setup:    "
		if i > 0 {
			label = "            "
		}
		fmt.Fprintf(w, "%s%s\n", label, s)
	}
	fmt.Fprintln(w)
}

// WriteResult writes one check's line, with what differs below it; width
// aligns the facts (IDWidth).
func WriteResult(w io.Writer, res Result, width int) {
	ref := ""
	if res.Ref != "" {
		ref = "  (" + res.Ref + ")"
	}
	fmt.Fprintf(w, "%-8s %-*s  %s%s\n", res.Status, width, res.ID, res.Fact, ref)
	indent := strings.Repeat(" ", 9)
	switch res.Status {
	case OK:
		if res.Real != "" {
			fmt.Fprintf(w, "%s  real %s; expected %s\n", indent, res.Real, res.Expected)
		}
		return
	case Skipped:
		fmt.Fprintf(w, "%s  %s\n", indent, res.Detail)
		return
	}
	// Inconclusive, Differs, Error: the detail, then both sides.
	fmt.Fprintf(w, "%s  %s\n", indent, res.Detail)
	if res.Real != "" || res.Expected != "" {
		fmt.Fprintf(w, "%s    real      %s\n%s    expected  %s\n", indent, res.Real, indent, res.Expected)
	}
	for _, st := range res.Steps {
		if st.RealNormalized != nil {
			writeDiff(w, indent+"  ", st)
			return
		}
	}
}

// WriteFooter writes the cleanup and the summary.
func (r *Report) WriteFooter(w io.Writer) {
	fmt.Fprintln(w)
	if r.Interrupted {
		fmt.Fprintln(w, "Interrupted: the remaining checks did not run.")
	}
	if len(r.Cleanup) > 0 {
		fmt.Fprintf(w, "Cleanup: %s.\n", strings.Join(r.Cleanup, "; "))
	}
	for _, e := range r.CleanupErrors {
		fmt.Fprintf(w, "Cleanup failed: %s\n", e)
	}
	if r.Labels != "" {
		fmt.Fprintf(w, "The labels in parentheses are explained at %s.\n", r.Labels)
	}
	s := Summarize(r.Results)
	inconclusive := ""
	if s.Inconclusive > 0 {
		inconclusive = fmt.Sprintf(", %d inconclusive", s.Inconclusive)
	}
	fmt.Fprintf(w, "%s: %d ok, %d differ%s, %d skipped, %s (%s).\n",
		english.Plural(len(r.Results), "check"), s.OK, s.Differs, inconclusive, s.Skipped, english.Plural(s.Errors, "error"), time.Duration(r.Took).Round(100*time.Millisecond))
}

// writeDiff shows a step's normalised answers where they differ, the real
// line above the expected one, quoted so that spacing shows.
func writeDiff(w io.Writer, indent string, st StepRecord) {
	rn, en := st.RealNormalized, st.ExpectedNormalized
	fmt.Fprintf(w, "%s$ %s\n", indent, st.Call)
	if rn.Exit != en.Exit {
		fmt.Fprintf(w, "%s  exit status: real %d, expected %d\n", indent, rn.Exit, en.Exit)
	}
	for _, stream := range []struct{ name, real, expected string }{
		{"stdout", rn.Stdout, en.Stdout}, {"stderr", rn.Stderr, en.Stderr},
	} {
		if stream.real == stream.expected {
			continue
		}
		rl, el := lines(stream.real), lines(stream.expected)
		shown := 0
		for i := 0; i < max(len(rl), len(el)); i++ {
			a, b := at(rl, i), at(el, i)
			if a == b {
				continue
			}
			if shown == maxDiffLines {
				fmt.Fprintf(w, "%s  … more %s lines differ (see --json)\n", indent, stream.name)
				break
			}
			shown++
			fmt.Fprintf(w, "%s  %s line %d:\n%s    real      %s\n%s    expected  %s\n", indent, stream.name, i+1, indent, a, indent, b)
		}
	}
}

func lines(s string) []string {
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

func at(l []string, i int) string {
	if i >= len(l) {
		return "(no line)"
	}
	return fmt.Sprintf("%q", l[i])
}
