// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/macake/macake/shape"
)

// ShapingSwitch takes macake's shaping off and puts it back, for
// Compare's unshaped and shaped runs.
type ShapingSwitch interface {
	// Off takes the shaping off. lease is how long the run needs it off:
	// a switch that can (a running watch) puts the shaping back by itself
	// after it, so a compare that dies leaves nothing unshaped.
	Off(ctx context.Context, lease time.Duration) error
	// On puts the shaping back and returns once it is in place.
	On(ctx context.Context) error
}

// Compare is `macake bench --compare`: the load test unshaped, shaped,
// and unshaped again (the order MaCake's and cake-autorate's published
// comparisons use, so that drift of the link between runs shows), with
// each run's grades side by side.
type Compare struct {
	// Bench runs one load test.
	Bench func(ctx context.Context) (BenchReport, error)
	// Switch takes the shaping off and on; Lease is how long one unshaped
	// run may keep it off.
	Switch ShapingSwitch
	Lease  time.Duration
	// Settle is the wait after the shaping is back before the shaped run:
	// the controller starts from its known-good rate and needs a moment
	// of traffic to find the link's.
	Settle time.Duration
	// LeaveOn puts the shaping back after the last, unshaped run (it was
	// on before the compare).
	LeaveOn bool
	// Progress hears which run starts; nil for nothing.
	Progress io.Writer
}

// CompareRun is one of a compare's runs.
type CompareRun struct {
	Name   string      `json:"name"`
	Shaped bool        `json:"shaped"`
	Report BenchReport `json:"report"`
}

// CompareReport is a compare's result.
type CompareReport struct {
	FormatVersion string       `json:"format_version"`
	Runs          []CompareRun `json:"runs"`
	// Before and After are the overall grades unshaped (the worse of the
	// two unshaped runs) and shaped.
	Before Grade `json:"before"`
	After  Grade `json:"after"`
	// Failed names the run that failed twice, when the compare stopped
	// there; Runs holds the ones done before it.
	Failed string `json:"failed,omitempty"`
}

// Run runs the three load tests, each failed one once more before it
// gives up; then it returns the runs done with the error (rep.Failed
// names the run). The shaping is put back as LeaveOn says even when a
// run fails.
func (c Compare) Run(ctx context.Context) (rep CompareReport, err error) {
	rep.FormatVersion = formatVersion
	defer func() {
		if c.LeaveOn {
			if onErr := c.Switch.On(context.WithoutCancel(ctx)); onErr != nil {
				err = errors.Join(err, fmt.Errorf("putting the shaping back: %w", onErr))
			}
		}
	}()
	steps := []struct {
		name   string
		shaped bool
	}{{"unshaped", false}, {"shaped", true}, {"unshaped again", false}}
	for i, st := range steps {
		var r BenchReport
		var err error
		// A run that fails (a connection that timed out under the very
		// load being measured) is tried once more before the compare
		// gives up, and the runs done are kept either way.
		for attempt := 1; attempt <= 2; attempt++ {
			if err := c.switchFor(ctx, st.shaped); err != nil {
				return rep, err
			}
			if c.Progress != nil {
				again := ""
				if attempt > 1 {
					again = " (again)"
				}
				fmt.Fprintf(c.Progress, "bench --compare: run %d of %d, %s%s\n", i+1, len(steps), st.name, again)
			}
			if r, err = c.Bench(ctx); err == nil || ctx.Err() != nil {
				break
			}
			if c.Progress != nil && attempt == 1 {
				fmt.Fprintf(c.Progress, "bench --compare: the %s run failed (%v); trying it once more\n", st.name, err)
			}
		}
		if err != nil {
			rep.Failed = st.name
			return rep, fmt.Errorf("the %s run: %w", st.name, err)
		}
		rep.Runs = append(rep.Runs, CompareRun{Name: st.name, Shaped: st.shaped, Report: r})
	}
	rep.Before = worse(rep.Runs[0].Report.Grades.Overall, rep.Runs[2].Report.Grades.Overall)
	rep.After = rep.Runs[1].Report.Grades.Overall
	return rep, nil
}

// switchFor takes the shaping off for an unshaped run (with a new lease,
// so a retried run has its whole lease), or puts it on and lets it settle
// for the shaped one.
func (c Compare) switchFor(ctx context.Context, shaped bool) error {
	if !shaped {
		if err := c.Switch.Off(ctx, c.Lease); err != nil {
			return fmt.Errorf("turning the shaping off: %w", err)
		}
		return nil
	}
	if err := c.Switch.On(ctx); err != nil {
		return fmt.Errorf("turning the shaping on: %w", err)
	}
	if c.Settle <= 0 {
		return nil
	}
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "bench --compare: the shaping is back; letting it settle for %v\n", c.Settle)
	}
	select {
	case <-ctx.Done():
		return errors.New("interrupted")
	case <-time.After(c.Settle):
	}
	return nil
}

// worse is the worse of two grades ("" when unknown counts as neither).
func worse(a, b Grade) Grade {
	switch {
	case a == "":
		return b
	case b == "" || band(a) >= band(b):
		return a
	}
	return b
}

// WriteText prints the runs as one table (throughput, the latency each
// load added, the grades and the responsiveness), then the before and
// after grades and what shaping cost in throughput.
func (rep CompareReport) WriteText(w io.Writer) {
	if len(rep.Runs) == 0 {
		return
	}
	first := rep.Runs[0].Report
	fmt.Fprintf(w, "bench --compare against %s; latency to %s (not exempt from shaping)\n\n", first.Server, strings.Join(first.LatencyTargets, ", "))
	row := func(cells ...string) {
		fmt.Fprintf(w, "%-15s %-12s %-12s %-10s %-10s %-10s %-8s %-8s %s\n", cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7], cells[8])
	}
	row("", "download", "upload", "added ↓", "added ↑", "both", "lost", "grade", "RPM")
	for _, r := range rep.Runs {
		g := r.Report.Grades
		grade := string(g.Overall)
		if grade == "" {
			grade = "-"
		}
		if g.Both.Grade != "" {
			grade += "/" + string(g.Both.Grade)
		}
		rpm := "-"
		if g.Both.RPM != nil {
			rpm = FormatRPM(*g.Both.RPM)
		}
		res := r.Report.res
		row(r.Name, shape.FormatApprox(res.Download.BitsPerSecond), shape.FormatApprox(res.Upload.BitsPerSecond),
			signedOrDash(res.DownLatency.Added.P50), signedOrDash(res.UpLatency.Added.P50), signedOrDash(res.BothLatency.Added.P50),
			loadedLoss(res), grade, rpm)
	}
	fmt.Fprintln(w, "(added: loaded minus idle median, like for like, over every probe sent, a lost one counting as the lost delay;")
	fmt.Fprintln(w, " lost: the probes under the three loads that got no reply; grade: overall/both-ways; RPM with both directions loaded)")
	if rep.Failed != "" {
		fmt.Fprintf(w, "\nIncomplete: the %s run failed twice, so there is no comparison; what finished is above.\n", rep.Failed)
	}
	if len(rep.Runs) < 3 {
		return
	}
	off1, on, off2 := rep.Runs[0].Report.res, rep.Runs[1].Report.res, rep.Runs[2].Report.res
	kept := func(on, a, b float64) string {
		if a+b <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f %%", 100*on/((a+b)/2))
	}
	fmt.Fprintf(w, "\nGrade %s unshaped, %s shaped. The shaper kept %s of the download and %s of the upload (against the mean of the unshaped runs)",
		gradeOrDash(rep.Before), gradeOrDash(rep.After), kept(on.Download.BitsPerSecond, off1.Download.BitsPerSecond, off2.Download.BitsPerSecond),
		kept(on.Upload.BitsPerSecond, off1.Upload.BitsPerSecond, off2.Upload.BitsPerSecond))
	if a, b := meanAdded(off1.BothLatency, off2.BothLatency), on.BothLatency.Added.P50; a >= 0 && on.BothLatency.Added.Targets > 0 {
		fmt.Fprintf(w, "; with both directions loaded it added %s instead of %s", shape.FormatLatencyChange(b), shape.FormatLatencyChange(a))
	}
	fmt.Fprintln(w, ".")
	if n := len(rep.Runs[1].Report.Grades.Notes); n > 0 {
		fmt.Fprintf(w, "Confidence of the shaped run: low: %s\n", strings.Join(rep.Runs[1].Report.Grades.Notes, "; "))
	}
}

// loadedLoss is the share of the probes under the three loads of a run
// that got no reply.
func loadedLoss(res LoadResult) string {
	return lossPercent(PhaseLatency{
		Sent: res.DownLatency.Sent + res.UpLatency.Sent + res.BothLatency.Sent,
		Lost: res.DownLatency.Lost + res.UpLatency.Lost + res.BothLatency.Lost,
	})
}

func gradeOrDash(g Grade) string {
	if g == "" {
		return "-"
	}
	return string(g)
}

// meanAdded is the mean of two phases' added medians, -1 when either is
// unknown.
func meanAdded(a, b PhaseLatency) time.Duration {
	if a.Added.Targets == 0 || b.Added.Targets == 0 {
		return -1
	}
	return (a.Added.P50 + b.Added.P50) / 2
}
