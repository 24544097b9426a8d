// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"math"
)

// SourceLoss is how far below the reference a candidate's geometric-mean
// score on one source may fall before the candidate counts as losing that
// source (1 %: the noise of a switch that never triggers).
const SourceLoss = 0.99

// Held is one source held out of a leave-one-source-out estimate.
type Held struct {
	// Source is the held-out folder and Cases the number of its traces.
	Source string
	Cases  int
	// Chosen is the candidate the decision rule picks on the other
	// sources (the reference itself when no candidate qualifies), and
	// TrainRatio its geometric-mean score over the reference's there.
	Chosen     string
	TrainRatio float64
	// Ratio is Chosen's geometric-mean score over the reference's on the
	// held-out source; Win, Tie and Loss are its verdicts there.
	Ratio          float64
	Win, Tie, Loss int
	// ProbeLoss and CallLoss are Chosen's mean loss of the probes and of
	// the call on the held-out source (Bench.MeanLoss), RefProbeLoss and
	// RefCallLoss the reference's.
	ProbeLoss, CallLoss       float64
	RefProbeLoss, RefCallLoss float64
}

// LOSO is a leave-one-source-out estimate of how a tuning decision does on
// links it was not made on: for every source, the decision is made again
// on the other sources alone and judged on the one left out.
type LOSO struct {
	// Ref is the reference arm (upstream) and Candidates the arms the
	// decision chooses from.
	Ref        string
	Candidates []string
	Held       []Held
	// Ratio is the geometric mean, over every trace, of the held-out
	// choice's score over the reference's; Win, Tie and Loss add up the
	// verdicts of the held-out choices.
	Ratio          float64
	Win, Tie, Loss int
}

// Choose is the decision rule: among the candidates that lose no source
// passing keep (none has a geometric-mean score below SourceLoss × the
// reference's), the one with the highest geometric-mean score over the
// reference's on the traces passing keep; the reference itself ("take
// nothing") when none qualifies or none beats it.
func (r *Result) Choose(ref int, candidates []int, keep func(*Case) bool) (best int, ratio float64) {
	best, ratio = ref, 1
	for _, c := range candidates {
		if c == ref {
			continue
		}
		lost := false
		for _, s := range r.Sources() {
			in := func(x *Case) bool { return x.Source == s && (keep == nil || keep(x)) }
			if r.countCases(in) > 0 && r.Ratio(c, ref, in) < SourceLoss {
				lost = true
				break
			}
		}
		if lost {
			continue
		}
		if q := r.Ratio(c, ref, keep); q > ratio {
			best, ratio = c, q
		}
	}
	return best, ratio
}

// Ratio is the geometric mean, over the cases passing keep where both arms
// measured some delay, of arm a's median score over arm b's (scores
// floored at 0.001 as in GeoMean). It is 1 when no case qualifies.
func (r *Result) Ratio(a, b int, keep func(*Case) bool) float64 {
	return r.ratioOf(a, b, keep, func(s Summary) float64 { return s.Score })
}

// RatioSurvivors is Ratio on the score over the probes that came back
// only (Summary.ScoreSurvivors): the figure of the tables before issue
// 24, printed to compare with them, never to decide.
func (r *Result) RatioSurvivors(a, b int, keep func(*Case) bool) float64 {
	return r.ratioOf(a, b, keep, func(s Summary) float64 { return s.ScoreSurvivors })
}

func (r *Result) ratioOf(a, b int, keep func(*Case) bool, metric func(Summary) float64) float64 {
	var sum float64
	n := 0
	for ci, row := range r.Outcomes {
		if keep != nil && !keep(&r.Cases[ci]) {
			continue
		}
		if l, ok := logRatio(row[a], row[b], metric); ok {
			sum += l
			n++
		}
	}
	if n == 0 {
		return 1
	}
	return math.Exp(sum / float64(n))
}

func logRatio(a, b *Outcome, metric func(Summary) float64) (float64, bool) {
	sa, sb := a.Summary(), b.Summary()
	if sa.Measured == 0 || sb.Measured == 0 {
		return 0, false
	}
	return math.Log(math.Max(metric(sa), 0.001)) - math.Log(math.Max(metric(sb), 0.001)), true
}

func (r *Result) countCases(keep func(*Case) bool) int {
	n := 0
	for i := range r.Cases {
		if keep(&r.Cases[i]) {
			n++
		}
	}
	return n
}

// LeaveOneSourceOut makes the decision of Choose once per source, on the
// other sources only, and judges the choice on the source left out. The
// reference and every candidate must be arms of r.
func (r *Result) LeaveOneSourceOut(ref string, candidates []string) (LOSO, error) {
	out := LOSO{Ref: ref, Candidates: candidates}
	ri := r.ArmIndex(ref)
	if ri < 0 {
		return out, fmt.Errorf("leave-one-source-out: no arm %q", ref)
	}
	var cis []int
	for _, c := range candidates {
		i := r.ArmIndex(c)
		if i < 0 {
			return out, fmt.Errorf("leave-one-source-out: no arm %q", c)
		}
		cis = append(cis, i)
	}
	var sum float64
	n := 0
	for _, s := range r.Sources() {
		in := func(c *Case) bool { return c.Source == s }
		others := func(c *Case) bool { return c.Source != s }
		best, train := r.Choose(ri, cis, others)
		h := Held{Source: s, Cases: r.countCases(in), Chosen: r.Arms[best], TrainRatio: train, Ratio: r.Ratio(best, ri, in)}
		h.ProbeLoss, h.CallLoss = r.MeanLoss(best, in)
		h.RefProbeLoss, h.RefCallLoss = r.MeanLoss(ri, in)
		if best == ri {
			h.Tie = h.Cases
		} else {
			h.Win, h.Tie, h.Loss = r.Tally(best, ri, in)
		}
		for ci, row := range r.Outcomes {
			if !in(&r.Cases[ci]) {
				continue
			}
			if l, ok := logRatio(row[best], row[ri], func(s Summary) float64 { return s.Score }); ok {
				sum += l
				n++
			}
		}
		out.Win, out.Tie, out.Loss = out.Win+h.Win, out.Tie+h.Tie, out.Loss+h.Loss
		out.Held = append(out.Held, h)
	}
	out.Ratio = 1
	if n > 0 {
		out.Ratio = math.Exp(sum / float64(n))
	}
	return out, nil
}
