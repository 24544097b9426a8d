// SPDX-License-Identifier: Apache-2.0

// Package bench runs the simulator over a directory of capacity traces with
// several seeds and start offsets per trace, and compares controllers as
// ../shared/reference/benchmark.md §4.2 prescribes: the median score per
// trace, the geometric mean across traces, and the win rule (A beats B when
// its D95 is no worse and its U at most 0.02 lower, one of them better by
// more than the bootstrap confidence interval; otherwise the score decides).
package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/linkmodel"
	"github.com/macake/macake/sim/trace"
)

// Case is one trace of the benchmark, loaded in its own direction.
type Case struct {
	Name  string
	Class string
	// Source is the folder the trace came from (one recording campaign:
	// mahimahi, nyu-mets, …), the unit leave-one-source-out holds out.
	Source  string
	Dir     shape.Direction
	Trace   *trace.Trace
	Reverse *trace.Trace // the other direction's paired trace, or nil
}

// skipped are files in the trace directories that are not capacity traces.
var skipped = map[string]bool{"COPYING": true, "README.upstream": true, "README.md": true, "LICENSE": true, "ping.csv": true}

// Cases finds every capacity trace under dir (one level of subdirectories,
// as ../shared/traces is laid out, each a source), sorted by name.
func Cases(dir string) ([]Case, error) {
	subdirs, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read traces: %w", err)
	}
	var cases []Case
	for _, sd := range subdirs {
		if !sd.IsDir() || strings.HasPrefix(sd.Name(), ".") {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, sd.Name()))
		if err != nil {
			return nil, fmt.Errorf("read traces: %w", err)
		}
		loaded := map[string][]*trace.Trace{}
		for _, f := range files {
			if f.IsDir() || skipped[f.Name()] || strings.HasPrefix(f.Name(), ".") {
				continue
			}
			path := filepath.Join(dir, sd.Name(), f.Name())
			ts, err := trace.Load(path)
			if err != nil {
				return nil, err
			}
			loaded[path] = ts
		}
		for path, ts := range loaded {
			for _, t := range ts {
				c := Case{Name: t.Name, Class: t.Class, Source: sd.Name(), Dir: t.Direction, Trace: t}
				// The reverse direction: the other column of the same file
				// when it has exactly one, or the mahimahi sibling file.
				var others []*trace.Trace
				for _, o := range ts {
					if o.Direction != t.Direction {
						others = append(others, o)
					}
				}
				if len(others) == 1 {
					c.Reverse = others[0]
				} else if sib, ok := loaded[trace.SiblingPath(path)]; ok && len(sib) == 1 {
					c.Reverse = sib[0]
				}
				cases = append(cases, c)
			}
		}
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("no traces under %s", dir)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	return cases, nil
}

// Config describes a benchmark.
type Config struct {
	// Options is the template of every run; Flows is replaced by Flows in
	// the case's direction, Seed and Offset per run.
	Options sim.Options
	Flows   int
	Seeds   int
	Offsets int
	Arms    []sim.Arm
	Workers int
}

// Outcome holds every run of one case and arm, in (seed, offset) order, so
// that two arms can be compared run by run.
type Outcome struct {
	Case *Case
	Arm  string
	Runs []*sim.Result
}

// Summary is the median of an outcome's runs in the case's direction.
// D50, D95, D99 and Score are over the Measured runs in which some
// measurement probe was measured (0 when none was), the delays over every
// probe sent, a lost one counting as the run's lost delay (package score);
// ProbeLoss is the median share of probes lost and CallLoss the call's in
// the case's direction; ScoreSurvivors the median score over the probes
// that came back only, the figure of the tables before issue 24.
type Summary struct {
	U, D50, D95, D99, Score float64
	ProbeLoss, CallLoss     float64
	ScoreSurvivors          float64
	Measured                int
}

// Summary returns the medians of the loaded direction's metrics.
func (o *Outcome) Summary() Summary {
	var u, d50, d95, d99, sc, old, loss, call []float64
	for _, r := range o.Runs {
		x := r.Dir[o.Case.Dir]
		u = append(u, x.U)
		loss = append(loss, x.ProbeLoss)
		call = append(call, x.Call.Loss)
		if x.DelaySamples == 0 {
			continue
		}
		d50 = append(d50, x.D50)
		d95 = append(d95, x.D95)
		d99 = append(d99, x.D99)
		sc = append(sc, x.Score)
		old = append(old, x.ScoreSurvivors)
	}
	return Summary{U: median(u), D50: median(d50), D95: median(d95), D99: median(d99), Score: median(sc), ScoreSurvivors: median(old),
		ProbeLoss: median(loss), CallLoss: median(call), Measured: len(d95)}
}

// Result is a whole benchmark: Outcomes[case][arm].
type Result struct {
	Cases    []Case
	Arms     []string
	Outcomes [][]*Outcome
	Config   Config
}

// Run runs every case with every arm, seed and offset.
func Run(cases []Case, cfg Config) (*Result, error) {
	if cfg.Seeds < 1 || cfg.Offsets < 1 {
		return nil, fmt.Errorf("bench: need at least one seed and one offset")
	}
	var jobs []sim.Job
	for ci := range cases {
		c := &cases[ci]
		period := c.Trace.Period()
		for _, arm := range cfg.Arms {
			for s := range cfg.Seeds {
				seed := uint64(s + 1)
				link := linkmodel.FromTrace(c.Trace, c.Reverse, seed)
				for k := range cfg.Offsets {
					opt := cfg.Options
					opt.Flows = [2]int{}
					opt.Flows[c.Dir] = cfg.Flows
					opt.Seed = seed
					opt.Offset = period * time.Duration(k) / time.Duration(cfg.Offsets)
					jobs = append(jobs, sim.Job{Link: link, Options: arm.Options(opt), Arm: arm})
				}
			}
		}
	}
	results, err := sim.RunAll(jobs, cfg.Workers)
	if err != nil {
		return nil, err
	}
	res := &Result{Cases: cases, Config: cfg}
	for _, a := range cfg.Arms {
		res.Arms = append(res.Arms, a.Name)
	}
	per := cfg.Seeds * cfg.Offsets
	i := 0
	for ci := range cases {
		row := make([]*Outcome, len(cfg.Arms))
		for ai, a := range cfg.Arms {
			row[ai] = &Outcome{Case: &res.Cases[ci], Arm: a.Name, Runs: results[i : i+per]}
			i += per
		}
		res.Outcomes = append(res.Outcomes, row)
	}
	return res, nil
}

// Verdict is the outcome of the win rule for A against B on one case.
type Verdict int

// The three verdicts.
const (
	Tie Verdict = iota
	Win
	Loss
)

// String returns "win", "tie" or "loss".
func (v Verdict) String() string {
	switch v {
	case Win:
		return "win"
	case Loss:
		return "loss"
	}
	return "tie"
}

// Compare applies benchmark.md §4.2's win rule to two outcomes of the same
// case, run by run: A wins when its median D95 is no higher and its median U
// at most 0.02 lower, with the D95 or U difference beyond its 95 %
// bootstrap confidence interval; B wins the mirrored way; otherwise the
// median score difference decides when it is beyond its interval, and it is
// a tie when it is not.
func Compare(a, b *Outcome) Verdict {
	d := a.Case.Dir
	n := min(len(a.Runs), len(b.Runs))
	dD95 := make([]float64, n)
	dU := make([]float64, n)
	dS := make([]float64, n)
	dD95, dU, dS = dD95[:0], dU[:0], dS[:0]
	for i := range n {
		x, y := a.Runs[i].Dir[d], b.Runs[i].Dir[d]
		if x.DelaySamples == 0 || y.DelaySamples == 0 {
			continue // no delay measured in one of the pair: nothing to compare
		}
		dD95 = append(dD95, x.D95-y.D95)
		dU = append(dU, x.U-y.U)
		dS = append(dS, x.Score-y.Score)
	}
	if len(dD95) == 0 {
		return Tie
	}
	sa, sb := a.Summary(), b.Summary()
	d95Lo, d95Hi := bootstrapMedianCI(dD95)
	uLo, uHi := bootstrapMedianCI(dU)
	if sa.D95 <= sb.D95 && sa.U >= sb.U-0.02 && (d95Hi < 0 || uLo > 0) {
		return Win
	}
	if sb.D95 <= sa.D95 && sb.U >= sa.U-0.02 && (d95Lo > 0 || uHi < 0) {
		return Loss
	}
	sLo, sHi := bootstrapMedianCI(dS)
	switch {
	case sLo > 0:
		return Win
	case sHi < 0:
		return Loss
	}
	return Tie
}

// bootstrapMedianCI returns the 95 % bootstrap interval of the median of v
// (2000 resamples, a fixed seed: the same data give the same interval).
func bootstrapMedianCI(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return 0, 0
	}
	r := sim.NewStream(0xb0075, 1)
	const n = 2000
	meds := make([]float64, n)
	buf := make([]float64, len(v))
	for i := range meds {
		for j := range buf {
			buf[j] = v[r.IntN(len(v))]
		}
		meds[i] = median(buf)
	}
	sort.Float64s(meds)
	return trace.Percentile(meds, 2.5), trace.Percentile(meds, 97.5)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return trace.Percentile(s, 50)
}

// GeoMean is the geometric mean of the median scores of arm over the cases
// that pass keep (scores floored at 0.001 so that one zero does not erase a
// controller; a case where no run of the arm measured any delay has no
// score and is left out).
func (r *Result) GeoMean(arm int, keep func(*Case) bool) float64 {
	var sum float64
	n := 0
	for ci, row := range r.Outcomes {
		if keep != nil && !keep(&r.Cases[ci]) {
			continue
		}
		s := row[arm].Summary()
		if s.Measured == 0 {
			continue
		}
		sum += math.Log(math.Max(s.Score, 0.001))
		n++
	}
	if n == 0 {
		return 0
	}
	return math.Exp(sum / float64(n))
}

// MeanLoss is the mean, over the cases that pass keep, of arm's median
// probe loss and median call loss: the loss printed beside the geometric
// mean of the scores.
func (r *Result) MeanLoss(arm int, keep func(*Case) bool) (probe, call float64) {
	n := 0
	for ci, row := range r.Outcomes {
		if keep != nil && !keep(&r.Cases[ci]) {
			continue
		}
		s := row[arm].Summary()
		probe += s.ProbeLoss
		call += s.CallLoss
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return probe / float64(n), call / float64(n)
}

// Tally counts the verdicts of arm a against arm b over the cases that pass
// keep.
func (r *Result) Tally(a, b int, keep func(*Case) bool) (win, tie, loss int) {
	for ci, row := range r.Outcomes {
		if keep != nil && !keep(&r.Cases[ci]) {
			continue
		}
		switch Compare(row[a], row[b]) {
		case Win:
			win++
		case Loss:
			loss++
		default:
			tie++
		}
	}
	return win, tie, loss
}

// ArmIndex returns the index of the named arm, or -1.
func (r *Result) ArmIndex(name string) int {
	for i, a := range r.Arms {
		if a == name {
			return i
		}
	}
	return -1
}

// Sources returns the case sources in name order.
func (r *Result) Sources() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range r.Cases {
		if !seen[c.Source] {
			seen[c.Source] = true
			out = append(out, c.Source)
		}
	}
	sort.Strings(out)
	return out
}
