// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/macake/macake/controller/sim/bench"
	"github.com/macake/macake/shape"
)

// Bench prints the trace benchmark: per trace and controller the median U,
// D95, D99 and score over the runs, the verdict of cand against ref on every
// trace, and the summary (geometric-mean score per controller and class,
// wins/ties/losses on the development and held-out traces).
func Bench(w io.Writer, r *bench.Result, ref, cand string) {
	ai, bi := r.ArmIndex(cand), r.ArmIndex(ref)
	cfg := r.Config
	if cfg.Options.Buffer <= 0 {
		cfg.Options.Buffer = time.Second
	}
	fmt.Fprintf(w, "Trace benchmark: %d traces × %d seeds × %d start offsets, %v per run, %d %s flows in the trace's direction, buffer %v of mean capacity, pipe queue %s.\n",
		len(r.Cases), cfg.Seeds, cfg.Offsets, cfg.Options.Duration, cfg.Flows, strings.ToUpper(cfg.Options.CC.String()), cfg.Options.Buffer, cfg.Options.Queue)
	fmt.Fprintln(w, "Medians over the runs; D95/D99: added one-way delay in ms of the probes that came back; lost: probes")
	fmt.Fprintln(w, "dropped (not in D95/D99); * marks held-out traces (not used for tuning).")
	fmt.Fprintln(w)
	head := []string{"trace", "class", "dir", "controller", "U", "D95", "D99", "lost", "score"}
	if ai >= 0 && bi >= 0 {
		head = append(head, cand+" vs "+ref)
	}
	t := Table{Header: head}
	for ci, row := range r.Outcomes {
		c := &r.Cases[ci]
		name := c.Name
		if !c.Dev {
			name += " *"
		}
		for k, o := range row {
			s := o.Summary()
			d95, d99, score := "—", "—", "—"
			if s.Measured > 0 {
				d95, d99, score = ms(s.D95), ms(s.D99), fmt.Sprintf("%.3f", s.Score)
			}
			cells := []string{"", "", "", o.Arm, fmt.Sprintf("%.3f", s.U), d95, d99, percent(s.ProbeLoss), score}
			if k == 0 {
				cells[0], cells[1], cells[2] = name, c.Class, dirShort(c.Dir)
			}
			if ai >= 0 && bi >= 0 {
				v := ""
				if k == ai {
					v = bench.Compare(row[ai], row[bi]).String()
				}
				cells = append(cells, v)
			}
			t.Add(cells...)
		}
	}
	t.Write(w)
	fmt.Fprintln(w)

	dev := func(c *bench.Case) bool { return c.Dev }
	held := func(c *bench.Case) bool { return !c.Dev }
	fmt.Fprintln(w, "Geometric-mean score:")
	g := Table{Header: append([]string{"controller", "all", "dev", "held-out"}, r.Classes()...)}
	for i, a := range r.Arms {
		cells := []string{a, fmt.Sprintf("%.3f", r.GeoMean(i, nil)), fmt.Sprintf("%.3f", r.GeoMean(i, dev)), fmt.Sprintf("%.3f", r.GeoMean(i, held))}
		for _, cl := range r.Classes() {
			cl := cl
			cells = append(cells, fmt.Sprintf("%.3f", r.GeoMean(i, func(c *bench.Case) bool { return c.Class == cl })))
		}
		g.Add(cells...)
	}
	g.Write(w)
	if bi < 0 {
		return
	}
	fmt.Fprintln(w)
	for i, a := range r.Arms {
		if i == bi || (ai >= 0 && i != ai && !strings.HasPrefix(a, ref) && !strings.HasPrefix(a, cand)) {
			continue
		}
		for _, set := range []struct {
			name string
			keep func(*bench.Case) bool
		}{{"all traces", nil}, {"development", dev}, {"held-out", held}} {
			win, tie, loss := r.Tally(i, bi, set.keep)
			n := win + tie + loss
			if n == 0 {
				continue
			}
			ratio := r.GeoMean(i, set.keep) / r.GeoMean(bi, set.keep)
			fmt.Fprintf(w, "%s vs %s, %s: %d wins, %d ties, %d losses (wins or ties on %.0f %%); geometric-mean score %.2f×.\n",
				a, ref, set.name, win, tie, loss, 100*float64(win+tie)/float64(n), ratio)
		}
		for _, cl := range r.Classes() {
			cl := cl
			keep := func(c *bench.Case) bool { return c.Class == cl }
			win, tie, loss := r.Tally(i, bi, keep)
			fmt.Fprintf(w, "  %s: %d/%d/%d, score %.2f×", cl, win, tie, loss, r.GeoMean(i, keep)/r.GeoMean(bi, keep))
		}
		fmt.Fprintln(w)
	}
}

func dirShort(d shape.Direction) string {
	if d == shape.Upload {
		return "up"
	}
	return "down"
}
