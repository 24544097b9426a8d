// SPDX-License-Identifier: Apache-2.0

package simrun

import (
	"errors"
	"fmt"
	"strings"

	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/bench"
)

// DefaultCandidates are the variants `make bench` re-decides without each
// source: the tuning grid macake's law was chosen from (TuningGrid).
const DefaultCandidates = "grid"

// tuningKnobs are the dimensions of the tuning grid, each with the values
// tried. Every value sets its knob outright (never "as ours has it"), so a
// grid point means the same controller whatever macake's law is today.
var tuningKnobs = [][]string{
	// The delay thresholds: upstream's, or following the delay's jitter
	// down to a third or a fifth of them.
	{"-JitterThreshold", "+JitterThreshold@JitterFloor=0.333", "+JitterThreshold@JitterFloor=0.2"},
	// The largest increase per achieved-rate sample.
	{"@LargestIncrease=1.04", "@LargestIncrease=1.06", "@LargestIncrease=1.08"},
	// The strongest graded cut.
	{"@StrongestCut=0.75", "@StrongestCut=0.6"},
	// Upstream's pace, or a faster one: a deeper achieved cut, high load
	// from 60 %, cuts and increases 200 ms apart, the full cut at 45 ms.
	{"@AchievedCut=0.9@HighLoad=0.75@BufferbloatRefractory=300ms@Dir.FullCutThreshold=60ms",
		"@AchievedCut=0.8@HighLoad=0.6@BufferbloatRefractory=200ms@Dir.FullCutThreshold=45ms"},
}

// TuningGrid is every combination of the tuning knobs, as variants of
// ours (macake's law with its other improvements): the candidates the
// leave-one-source-out estimate chooses among (docs/MEASUREMENTS.md, "How
// ours was built"). `--candidates grid` names it.
func TuningGrid() []string {
	points := []string{"ours"}
	for _, knob := range tuningKnobs {
		var next []string
		for _, p := range points {
			for _, v := range knob {
				next = append(next, p+v)
			}
		}
		points = next
	}
	// Switches come before settings in a variant's name.
	for i, p := range points {
		var sw, set strings.Builder
		for _, part := range splitVariant(strings.TrimPrefix(p, "ours")) {
			if part[0] == '@' {
				set.WriteString(part)
			} else {
				sw.WriteString(part)
			}
		}
		points[i] = "ours" + sw.String() + set.String()
	}
	return points
}

// splitVariant cuts "+A@F=v-B" into its parts "+A", "@F=v", "-B".
func splitVariant(s string) []string {
	var parts []string
	for s != "" {
		j := strings.IndexAny(s[1:], "+-@")
		if j < 0 {
			parts = append(parts, s)
			break
		}
		parts = append(parts, s[:j+1])
		s = s[j+1:]
	}
	return parts
}

// Bench is a --traces benchmark, built and checked: every trace of the
// directory with every arm, seed and start offset.
type Bench struct {
	// Cases are the traces found, in name order.
	Cases []bench.Case
	// Config holds the arms and the runs per trace.
	Config bench.Config
	// Candidates are the arms of the leave-one-source-out estimate,
	// chosen among against upstream (none: no estimate).
	Candidates []string
}

// NewBench checks s and finds its traces. Its errors are UsageErrors for
// the flags and plain errors for a directory that cannot be read.
func NewBench(s Spec) (*Bench, error) {
	arms, opt, err := s.prepare(benchControllers)
	if err != nil {
		return nil, err
	}
	if s.Policy != "" {
		return nil, UsageError{errors.New("--policy sets one link's bounds; with --traces every trace takes its own (p5/p25/p95)")}
	}
	var cands []string
	if list := s.Candidates; list != "none" {
		if list == "" {
			list = DefaultCandidates
		}
		list = strings.ReplaceAll(","+list+",", ",grid,", ","+strings.Join(TuningGrid(), ",")+",")
		list = strings.Trim(list, ",")
		extra, err := candidateArms(list)
		if err != nil {
			return nil, err
		}
		for _, a := range extra {
			cands = append(cands, a.Name)
			if !hasArm(arms, a.Name) {
				arms = append(arms, a)
			}
		}
		if !hasArm(arms, "upstream") {
			f, _ := controllerFactory("upstream")
			arms = append(arms, sim.Arm{Name: "upstream", Factory: f})
		}
	}
	cases, err := bench.Cases(s.Traces)
	if err != nil {
		return nil, err
	}
	return &Bench{Cases: cases, Candidates: cands, Config: bench.Config{Options: opt, Flows: s.Flows, Seeds: s.Seeds, Offsets: s.Offsets, Arms: arms, Workers: s.Workers}}, nil
}

// candidateArms resolves a --candidates list: autorate controllers and
// their variants only, since the estimate is about tuning the controller.
func candidateArms(list string) ([]sim.Arm, error) {
	as, err := arms(list)
	if err != nil {
		return nil, usage(fmt.Errorf("--candidates: %w", errors.Unwrap(err)))
	}
	for _, a := range as {
		if !strings.HasPrefix(a.Name, "upstream") && !strings.HasPrefix(a.Name, "ours") {
			return nil, UsageError{fmt.Errorf("--candidates %s: %q is not an autorate controller (upstream, ours or a variant such as ours-FastRecovery)", list, a.Name)}
		}
	}
	return as, nil
}

// LOSO is the leave-one-source-out estimate of res against upstream, nil
// without candidates.
func (b *Bench) LOSO(res *bench.Result) (*bench.LOSO, error) {
	if len(b.Candidates) == 0 {
		return nil, nil
	}
	l, err := res.LeaveOneSourceOut("upstream", b.Candidates)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// Runs is how many simulations Run does, for a progress line.
func (b *Bench) Runs() int {
	return len(b.Cases) * len(b.Config.Arms) * b.Config.Seeds * b.Config.Offsets
}

// Run runs the benchmark.
func (b *Bench) Run() (*bench.Result, error) { return bench.Run(b.Cases, b.Config) }

// BenchDocument is the JSON form of a trace benchmark (`macake sim
// --traces DIR --json`): per trace, each controller's median metrics and
// the verdict of ours against upstream, each controller's geometric-mean
// score across the traces and per source, and the leave-one-source-out
// estimate when candidates ran.
type BenchDocument struct {
	Traces          []BenchTrace                  `json:"traces"`
	GeoMean         map[string]float64            `json:"geomean_score"`
	GeoMeanBySource map[string]map[string]float64 `json:"geomean_score_by_source"`
	LOSO            *bench.LOSO                   `json:"leave_one_source_out,omitempty"`
}

// BenchTrace is one trace's row of a BenchDocument.
type BenchTrace struct {
	Trace       string     `json:"trace"`
	Class       string     `json:"class"`
	Source      string     `json:"source"`
	Direction   string     `json:"direction"`
	Controllers []BenchArm `json:"controllers"`
	// Verdict is the win rule's verdict of ours against upstream, when
	// both ran.
	Verdict string `json:"ours_vs_upstream,omitempty"`
}

// BenchArm is one controller's medians on one trace.
type BenchArm struct {
	Controller string   `json:"controller"`
	U          float64  `json:"u"`
	D50        *float64 `json:"d50_ms"` // null: no run measured any delay
	D95        *float64 `json:"d95_ms"`
	D99        *float64 `json:"d99_ms"`
	Score      *float64 `json:"score"`
	ProbeLoss  float64  `json:"probe_loss"`
	CallLoss   float64  `json:"call_loss"`
	// ScoreSurvivors is the score over the probes that came back only,
	// as tables before issue 24 computed it: to compare with them.
	ScoreSurvivors *float64 `json:"score_survivors_only"`
}

// NewBenchDocument summarises res (and its estimate loso, or nil) for JSON.
func NewBenchDocument(res *bench.Result, loso *bench.LOSO) BenchDocument {
	out := BenchDocument{GeoMean: map[string]float64{}, GeoMeanBySource: map[string]map[string]float64{}, LOSO: loso}
	ai, bi := res.ArmIndex("ours"), res.ArmIndex("upstream")
	for ci, row := range res.Outcomes {
		c := res.Cases[ci]
		cj := BenchTrace{Trace: c.Name, Class: c.Class, Source: c.Source, Direction: c.Dir.String()}
		for _, o := range row {
			s := o.Summary()
			a := BenchArm{Controller: o.Arm, U: s.U, ProbeLoss: s.ProbeLoss, CallLoss: s.CallLoss}
			if s.Measured > 0 {
				a.D50, a.D95, a.D99, a.Score, a.ScoreSurvivors = &s.D50, &s.D95, &s.D99, &s.Score, &s.ScoreSurvivors
			}
			cj.Controllers = append(cj.Controllers, a)
		}
		if ai >= 0 && bi >= 0 {
			cj.Verdict = bench.Compare(row[ai], row[bi]).String()
		}
		out.Traces = append(out.Traces, cj)
	}
	for i, a := range res.Arms {
		out.GeoMean[a] = res.GeoMean(i, nil)
		by := map[string]float64{}
		for _, src := range res.Sources() {
			by[src] = res.GeoMean(i, func(c *bench.Case) bool { return c.Source == src })
		}
		out.GeoMeanBySource[a] = by
	}
	return out
}
