// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/macake/macake/score"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim/bench"
)

// Bench prints the trace benchmark: per trace and controller the median U,
// D50, D95, D99 and score over the runs, the verdict of cand against ref on
// every trace, and the summary (geometric-mean score per controller and
// source, wins/ties/losses per source). With loso it adds the
// leave-one-source-out estimate: the candidates' scores per source and
// the decision made again without each source.
func Bench(w io.Writer, r *bench.Result, ref, cand string, loso *bench.LOSO) {
	ai, bi := r.ArmIndex(cand), r.ArmIndex(ref)
	cfg := r.Config
	if cfg.Options.Buffer <= 0 {
		cfg.Options.Buffer = time.Second
	}
	fmt.Fprintf(w, "Trace benchmark: %d traces from %d sources × %d seeds × %d start offsets, %v per run, %d %s flows in the trace's direction, buffer %v of mean capacity, pipe queue %s.\n",
		len(r.Cases), len(r.Sources()), cfg.Seeds, cfg.Offsets, cfg.Options.Duration, cfg.Flows, strings.ToUpper(cfg.Options.CC.String()), cfg.Options.Buffer, cfg.Options.Queue)
	lost := score.LostOrDefault(cfg.Options.LostDelay).String()
	fmt.Fprintf(w, "Medians over the runs; D50/D95/D99: added one-way delay in ms over every probe sent, a lost one counting as %s;\n", lost)
	fmt.Fprintln(w, "lost: probes dropped; call lost: packets of the call (50/s of 200 bytes, beside the load) dropped in the trace's direction.")
	fmt.Fprintln(w)
	head := []string{"trace", "class", "dir", "controller", "U", "D50", "D95", "D99", "lost", "call lost", "score"}
	if ai >= 0 && bi >= 0 {
		head = append(head, cand+" vs "+ref)
	}
	t := Table{Header: head}
	for ci, row := range r.Outcomes {
		c := &r.Cases[ci]
		for k, o := range row {
			s := o.Summary()
			d50, d95, d99, score := "—", "—", "—", "—"
			if s.Measured > 0 {
				d50, d95, d99, score = ms(s.D50), ms(s.D95), ms(s.D99), fmt.Sprintf("%.3f", s.Score)
			}
			cells := []string{"", "", "", o.Arm, fmt.Sprintf("%.3f", s.U), d50, d95, d99, percent(s.ProbeLoss), percent(s.CallLoss), score}
			if k == 0 {
				cells[0], cells[1], cells[2] = c.Name, c.Class, dirShort(c.Dir)
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

	sources := r.Sources()
	of := func(src string) func(*bench.Case) bool { return func(c *bench.Case) bool { return c.Source == src } }
	fmt.Fprintln(w, "Geometric-mean score, and beside it the mean over the traces of the probes' and the call's loss:")
	g := Table{Header: append([]string{"controller", "all", "lost", "call lost"}, sources...)}
	for i, a := range r.Arms {
		probe, call := r.MeanLoss(i, nil)
		cells := []string{a, fmt.Sprintf("%.3f", r.GeoMean(i, nil)), percent(probe), percent(call)}
		for _, src := range sources {
			cells = append(cells, fmt.Sprintf("%.3f", r.GeoMean(i, of(src))))
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
		win, tie, loss := r.Tally(i, bi, nil)
		if n := win + tie + loss; n > 0 {
			fmt.Fprintf(w, "%s vs %s, all traces: %d wins, %d ties, %d losses (wins or ties on %.0f %%); geometric-mean score %.2f× (over the survivors only, as tables before issue 24: %.2f×).\n",
				a, ref, win, tie, loss, 100*float64(win+tie)/float64(n), r.Ratio(i, bi, nil), r.RatioSurvivors(i, bi, nil))
		}
		for _, src := range sources {
			win, tie, loss := r.Tally(i, bi, of(src))
			fmt.Fprintf(w, "  %s: %d/%d/%d, score %.2f×", src, win, tie, loss, r.Ratio(i, bi, of(src)))
		}
		fmt.Fprintln(w)
	}
	if loso != nil {
		fmt.Fprintln(w)
		LOSO(w, r, *loso)
	}
}

// LOSO prints a leave-one-source-out estimate: every candidate's score
// over the reference's per source (✗: below bench.SourceLoss, a lost
// source), then per held-out source the candidate the decision rule picks
// on the other sources and how it does on the one left out.
func LOSO(w io.Writer, r *bench.Result, l bench.LOSO) {
	ri := r.ArmIndex(l.Ref)
	sources := r.Sources()
	of := func(src string) func(*bench.Case) bool { return func(c *bench.Case) bool { return c.Source == src } }
	fmt.Fprintf(w, "Candidates, geometric-mean score over %s's per source (✗: a lost source, below %.2f×):\n", l.Ref, bench.SourceLoss)
	t := Table{Header: append([]string{"candidate", "all"}, sources...)}
	for _, c := range l.Candidates {
		ci := r.ArmIndex(c)
		cells := []string{c, ratio(r.Ratio(ci, ri, nil))}
		for _, src := range sources {
			q := r.Ratio(ci, ri, of(src))
			cell := ratio(q)
			if q < bench.SourceLoss {
				cell += " ✗"
			}
			cells = append(cells, cell)
		}
		t.Add(cells...)
	}
	t.Write(w)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Leave one source out: the candidate with the best score over %s's that loses no source, chosen on the\n", l.Ref)
	fmt.Fprintln(w, "other sources alone (none: keep the reference), and how it does on the source left out:")
	h := Table{Header: []string{"held out", "traces", "chosen on the others", "there", "held out: score", "W/T/L", "lost", "call lost"}}
	for _, x := range l.Held {
		h.Add(x.Source, fmt.Sprint(x.Cases), x.Chosen, ratio(x.TrainRatio), ratio(x.Ratio), fmt.Sprintf("%d/%d/%d", x.Win, x.Tie, x.Loss),
			percent(x.ProbeLoss)+" ("+percent(x.RefProbeLoss)+")", percent(x.CallLoss)+" ("+percent(x.RefCallLoss)+")")
	}
	h.Write(w)
	fmt.Fprintf(w, "(lost, call lost: the chosen one's mean loss on the source left out, %s's in brackets)\n", l.Ref)
	n := l.Win + l.Tie + l.Loss
	if n > 0 {
		fmt.Fprintf(w, "Leave-one-source-out estimate vs %s: geometric-mean score %.2f×; %d wins, %d ties, %d losses (wins or ties on %.0f %%).\n",
			l.Ref, l.Ratio, l.Win, l.Tie, l.Loss, 100*float64(l.Win+l.Tie)/float64(n))
	}
}

func ratio(v float64) string { return fmt.Sprintf("%.2f×", v) }

func dirShort(d shape.Direction) string {
	if d == shape.Upload {
		return "up"
	}
	return "down"
}
