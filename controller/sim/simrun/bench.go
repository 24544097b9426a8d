// SPDX-License-Identifier: Apache-2.0

package simrun

import (
	"errors"

	"github.com/macake/macake/controller/sim/bench"
)

// Bench is a --traces benchmark, built and checked: every trace of the
// directory with every arm, seed and start offset.
type Bench struct {
	// Cases are the traces found, in name order.
	Cases []bench.Case
	// Config holds the arms and the runs per trace.
	Config bench.Config
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
	cases, err := bench.Cases(s.Traces)
	if err != nil {
		return nil, err
	}
	return &Bench{Cases: cases, Config: bench.Config{Options: opt, Flows: s.Flows, Seeds: s.Seeds, Offsets: s.Offsets, Arms: arms, Workers: s.Workers}}, nil
}

// Runs is how many simulations Run does, for a progress line.
func (b *Bench) Runs() int {
	return len(b.Cases) * len(b.Config.Arms) * b.Config.Seeds * b.Config.Offsets
}

// Run runs the benchmark.
func (b *Bench) Run() (*bench.Result, error) { return bench.Run(b.Cases, b.Config) }

// BenchDocument is the JSON form of a trace benchmark (`macake sim
// --traces DIR --json`): per trace, each controller's median metrics and
// the verdict of ours against upstream, and each controller's geometric-mean
// score across the traces.
type BenchDocument struct {
	Traces  []BenchTrace       `json:"traces"`
	GeoMean map[string]float64 `json:"geomean_score"`
}

// BenchTrace is one trace's row of a BenchDocument.
type BenchTrace struct {
	Trace       string     `json:"trace"`
	Class       string     `json:"class"`
	Direction   string     `json:"direction"`
	Development bool       `json:"development"`
	Controllers []BenchArm `json:"controllers"`
	// Verdict is the win rule's verdict of ours against upstream, when
	// both ran.
	Verdict string `json:"ours_vs_upstream,omitempty"`
}

// BenchArm is one controller's medians on one trace.
type BenchArm struct {
	Controller string   `json:"controller"`
	U          float64  `json:"u"`
	D95        *float64 `json:"d95_ms"` // null: no run measured any delay
	D99        *float64 `json:"d99_ms"`
	Score      *float64 `json:"score"`
	ProbeLoss  float64  `json:"probe_loss"`
}

// NewBenchDocument summarises res for JSON.
func NewBenchDocument(res *bench.Result) BenchDocument {
	out := BenchDocument{GeoMean: map[string]float64{}}
	ai, bi := res.ArmIndex("ours"), res.ArmIndex("upstream")
	for ci, row := range res.Outcomes {
		c := res.Cases[ci]
		cj := BenchTrace{Trace: c.Name, Class: c.Class, Direction: c.Dir.String(), Development: c.Dev}
		for _, o := range row {
			s := o.Summary()
			a := BenchArm{Controller: o.Arm, U: s.U, ProbeLoss: s.ProbeLoss}
			if s.Measured > 0 {
				a.D95, a.D99, a.Score = &s.D95, &s.D99, &s.Score
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
	}
	return out
}
