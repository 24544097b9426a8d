// SPDX-License-Identifier: Apache-2.0

// Package report renders simulator results for people: aligned text tables
// (the side-by-side comparison, the drift-controlled off/on/off phases, the
// trace benchmark) and an SVG of rates, capacity and added delay over time.
package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/macake/macake/score"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
)

// Table is a small aligned text table: the first column left-aligned, the
// others right-aligned.
type Table struct {
	Header []string
	Rows   [][]string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Write prints the table with two spaces between columns.
func (t *Table) Write(w io.Writer) {
	width := make([]int, len(t.Header))
	for i, h := range t.Header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(width) && utf8.RuneCountInString(c) > width[i] {
				width[i] = utf8.RuneCountInString(c)
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i >= len(width) {
				break
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(t.Header)
	for _, r := range t.Rows {
		line(r)
	}
}

// Comparison prints one table per loaded direction: every controller of
// the run side by side (benchmark.md §4.1 metrics and the §4.2 score).
func Comparison(w io.Writer, results []*sim.Result) {
	if len(results) == 0 {
		return
	}
	if before, after := unshapedAndShaped(results); before != nil && after != nil {
		var dirs []shape.Direction
		for _, d := range []shape.Direction{shape.Download, shape.Upload} {
			if results[0].Dir[d].Loaded {
				dirs = append(dirs, d)
			}
		}
		delay, kept := Headline(before, after, dirs)
		fmt.Fprintf(w, "%s\n%s\n\n", delay, kept)
	}
	for _, d := range []shape.Direction{shape.Download, shape.Upload} {
		if !results[0].Dir[d].Loaded {
			continue
		}
		fmt.Fprintf(w, "%s (mean capacity %s over the measured %s):\n", d, mbit(results[0].Dir[d].Capacity),
			measured(results[0]))
		t := Table{Header: []string{"controller", "U", "goodput", "rate", "D50", "D95", "D99", "lost", ">100ms", "recover", "changes", "score"}}
		for _, r := range results {
			x := r.Dir[d]
			rate := "—"
			if x.MeanRate > 0 {
				rate = fmt.Sprintf("%.1f", x.MeanRate)
			}
			rec := "—"
			switch rd := x.RecoverDrop; {
			case rd.Events > 0 && rd.Unrecovered == rd.Events:
				rec = fmt.Sprintf("never (%d✗)", rd.Unrecovered)
			case rd.Events > 0:
				rec = fmt.Sprintf("%.1fs", rd.Median)
				if rd.Unrecovered > 0 {
					rec += fmt.Sprintf(" (%d✗)", rd.Unrecovered)
				}
			}
			d50, d95, d99, b100, score := "—", "—", "—", "—", "—"
			if x.DelaySamples > 0 {
				d50, d95, d99 = ms(x.D50), ms(x.D95), ms(x.D99)
				b100, score = fmt.Sprintf("%.1fs", x.B100), fmt.Sprintf("%.3f", x.Score)
			}
			t.Add(r.Controller, fmt.Sprintf("%.3f", x.U), fmt.Sprintf("%.1f", x.Goodput), rate,
				d50, d95, d99, percent(x.ProbeLoss), b100, rec,
				fmt.Sprintf("%.0f", x.RateChanges), score)
		}
		t.Write(w)
		fmt.Fprintln(w)
	}
	lost := score.LostOrDefault(results[0].LostDelay).String()
	fmt.Fprintln(w, "U: share of capacity used; goodput and rate (mean pipe rate) in Mbit/s; D50/D95/D99: one-way")
	fmt.Fprintln(w, "delay added to the true base delay (100 Hz probe through the pipes), ms, over every probe sent,")
	fmt.Fprintf(w, "a lost one counting as %s; lost: probes dropped on the way; >100ms: seconds per minute above 100 ms;\n", lost)
	fmt.Fprintln(w, "recover: median time back under 20 ms after a ≥30 % capacity drop (✗: drops not recovered before")
	fmt.Fprintln(w, "the run ended); changes: pipe rate changes per minute; score: U/(1 + D95/30 ms), higher is better;")
	fmt.Fprintln(w, "—: no probe measured. none: no shaper; oracle: a shaper told the link's capacity in advance, the")
	fmt.Fprintln(w, "best any controller could do.")
	Calls(w, results)
}

// Calls prints what the interactive call felt under each controller: per
// direction, the share of its packets lost and the one-way delay added to
// the path's (over every packet sent, a lost one counting as the run's
// lost delay) and the jitter. Nothing when the runs carried no call.
func Calls(w io.Writer, results []*sim.Result) {
	if len(results) == 0 || results[0].Dir[shape.Download].Call.Sent+results[0].Dir[shape.Upload].Call.Sent == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "The call beside the load (%d packets/s of %d bytes each way, through the pipes), added one-way delay in ms:\n",
		time.Second/results[0].CallInterval, sim.CallBytes)
	t := Table{Header: []string{"controller", "↓ lost", "↓ p50", "↓ p90", "↓ p99", "↓ jitter", "↑ lost", "↑ p50", "↑ p90", "↑ p99", "↑ jitter"}}
	for _, r := range results {
		cells := []string{r.Controller}
		for _, d := range []shape.Direction{shape.Download, shape.Upload} {
			c := r.Dir[d].Call
			if c.Sent == 0 {
				cells = append(cells, "—", "—", "—", "—", "—")
				continue
			}
			cells = append(cells, percent(c.Loss), ms(c.P50), ms(c.P90), ms(c.P99), ms(c.Jitter))
		}
		t.Add(cells...)
	}
	t.Write(w)
}

func measured(r *sim.Result) string {
	return fmt.Sprintf("%g s", r.Measured.Seconds())
}

// percent prints a share; shares that round to zero but are not print as
// "<0.1%".
func percent(v float64) string {
	switch {
	case v == 0:
		return "0%"
	case v < 0.001:
		return "<0.1%"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

// Phases prints the drift-controlled off/on/off table of one run, as MaCake
// reports its Starlink result (benchmark.md §2.1).
func Phases(w io.Writer, controller string, r *sim.Result) {
	if len(r.Phases) != 3 {
		return
	}
	fmt.Fprintf(w, "Drift-controlled off / on / off (%s shaping only in the middle %.0f s of one continuous %.0f s run):\n",
		controller, (r.Duration / 3).Seconds(), r.Duration.Seconds())
	t := Table{Header: []string{"phase", "download", "upload", "added median", "added p90"}}
	for _, p := range r.Phases {
		p50, p90 := "—", "—"
		if p.Samples > 0 {
			p50, p90 = fmt.Sprintf("+%.1f ms", p.RTT50), fmt.Sprintf("+%.1f ms", p.RTT90)
		}
		t.Add(p.Name, mbit(p.Goodput[shape.Download]), mbit(p.Goodput[shape.Upload]), p50, p90)
	}
	t.Write(w)
	off1, on, off2 := r.Phases[0], r.Phases[1], r.Phases[2]
	offDown := (off1.Goodput[shape.Download] + off2.Goodput[shape.Download]) / 2
	offUp := (off1.Goodput[shape.Upload] + off2.Goodput[shape.Upload]) / 2
	off50 := (off1.RTT50 + off2.RTT50) / 2
	off90 := (off1.RTT90 + off2.RTT90) / 2
	var parts []string
	if offDown > 0 {
		parts = append(parts, fmt.Sprintf("%.1f %% of the download", 100*on.Goodput[shape.Download]/offDown))
	}
	if offUp > 0 {
		parts = append(parts, fmt.Sprintf("%.1f %% of the upload", 100*on.Goodput[shape.Upload]/offUp))
	}
	delay := fmt.Sprintf("added median %s, p90 %s", change(on.RTT50, off50), change(on.RTT90, off90))
	if off1.Samples == 0 || on.Samples == 0 || off2.Samples == 0 {
		delay = "added delay n/a (a phase has no probe back)"
	}
	fmt.Fprintf(w, "on vs the mean of the off phases: %s kept; %s.\n", strings.Join(parts, ", "), delay)
	fmt.Fprintf(w, "Drift between the off phases: %+.1f Mbit/s download, %+.1f ms median.\n",
		off2.Goodput[shape.Download]-off1.Goodput[shape.Download], off2.RTT50-off1.RTT50)
	if driftDominates(off1, on, off2) {
		fmt.Fprintln(w, "The link moved more between the off phases than shaping moved it, so this table is no evidence")
		fmt.Fprintln(w, "either way; the side-by-side runs above, on the same capacity, are.")
	}
	fmt.Fprintln(w, "Added delay here is round-trip (as a ping sees it), against the path's true base RTT.")
}

// driftDominates reports whether the link changed between the two off
// phases by more than shaping changed it: the download goodput moved by
// more than a quarter of its mean, or the added median by more than the
// shaped phase's difference from the off phases' mean. The table's "kept"
// and "-N %" then rest on a baseline that moved (the demo's: +125 Mbit/s).
func driftDominates(off1, on, off2 sim.Phase) bool {
	mean := (off1.Goodput[shape.Download] + off2.Goodput[shape.Download]) / 2
	if mean > 0 && math.Abs(off2.Goodput[shape.Download]-off1.Goodput[shape.Download]) > mean/4 {
		return true
	}
	effect := math.Abs(on.RTT50 - (off1.RTT50+off2.RTT50)/2)
	return math.Abs(off2.RTT50-off1.RTT50) > effect
}

func change(now, before float64) string {
	if before <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.0f %%", 100*(now-before)/before)
}

func mbit(v float64) string { return fmt.Sprintf("%.1f Mbit/s", v) }

func ms(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
