// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/macake/macake/score"
)

// CalibrationTolerance is how far the simulator's ratios (ours/upstream,
// ours/oracle) may sit from the kernel's before the simulator needs
// fixing: ±15 %.
const CalibrationTolerance = 0.15

// LossTolerance is how far the simulator's loss of the call may sit from
// the kernel's, relative, before the simulator needs fixing: ±30 % (issue
// 24). Below LossFloor both are noise and agree.
const (
	LossTolerance = 0.30
	LossFloor     = 0.005
)

// ReadMeasures reads the -e2e.json file: one Measure a line.
func ReadMeasures(r io.Reader) ([]Measure, error) {
	var out []Measure
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var m Measure
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// Combine reduces the measures of one scenario and controller (the two
// unshaped phases of a run, or several seeds) to one: the median of each
// field. It returns them in the order their scenario and controller first
// appear.
func Combine(ms []Measure) []Measure {
	type key struct{ sc, ctl string }
	var order []key
	groups := map[key][]Measure{}
	for _, m := range ms {
		k := key{m.Scenario, m.Controller}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m)
	}
	out := make([]Measure, 0, len(order))
	for _, k := range order {
		g := groups[k]
		med := func(f func(Measure) float64) float64 {
			v := make([]float64, len(g))
			for i, m := range g {
				v[i] = f(m)
			}
			slices.Sort(v)
			if n := len(v); n%2 == 0 {
				return (v[n/2-1] + v[n/2]) / 2
			}
			return v[len(v)/2]
		}
		flow := func(f func(Measure) score.Flow) score.Flow {
			return score.Flow{
				Sent:   int(med(func(m Measure) float64 { return float64(f(m).Sent) })),
				Lost:   int(med(func(m Measure) float64 { return float64(f(m).Lost) })),
				Loss:   med(func(m Measure) float64 { return f(m).Loss }),
				P50:    med(func(m Measure) float64 { return f(m).P50 }),
				P90:    med(func(m Measure) float64 { return f(m).P90 }),
				P99:    med(func(m Measure) float64 { return f(m).P99 }),
				Jitter: med(func(m Measure) float64 { return f(m).Jitter }),
			}
		}
		out = append(out, Measure{Scenario: k.sc, Controller: k.ctl,
			Goodput:       med(func(m Measure) float64 { return m.Goodput }),
			UploadGoodput: med(func(m Measure) float64 { return m.UploadGoodput }),
			U:             med(func(m Measure) float64 { return m.U }),
			P50:           med(func(m Measure) float64 { return m.P50 }),
			P90:           med(func(m Measure) float64 { return m.P90 }),
			P95:           med(func(m Measure) float64 { return m.P95 }),
			P99:           med(func(m Measure) float64 { return m.P99 }),
			Loss:          med(func(m Measure) float64 { return m.Loss }),
			Score:         med(func(m Measure) float64 { return m.Score }),
			CallDown:      flow(func(m Measure) score.Flow { return m.CallDown }),
			CallUp:        flow(func(m Measure) score.Flow { return m.CallUp }),
		})
	}
	return out
}

// find returns the measure of scenario and controller in ms, or nil.
func find(ms []Measure, scenario, controller string) *Measure {
	for i := range ms {
		if ms[i].Scenario == scenario && ms[i].Controller == controller {
			return &ms[i]
		}
	}
	return nil
}

// Ratios are the two figures the calibration must get right, for one
// scenario of combined measures: ours' score over upstream's and over the
// oracle's (NaN when a controller is missing or scored 0).
func Ratios(ms []Measure, scenario string) (oursUp, oursOracle float64) {
	r := func(a, b string) float64 {
		x, y := find(ms, scenario, a), find(ms, scenario, b)
		if x == nil || y == nil || y.Score <= 0 {
			return math.NaN()
		}
		return x.Score / y.Score
	}
	return r(ArmOurs, ArmUpstream), r(ArmOurs, ArmOracle)
}

func scenarios(ms []Measure) []string {
	var out []string
	for _, m := range ms {
		if !slices.Contains(out, m.Scenario) {
			out = append(out, m.Scenario)
		}
	}
	return out
}

// WriteScores prints one run's measures as a Markdown table (U, the
// ping's added p50/p90/p95/p99 over every ping sent, its loss and the
// score per controller, then the call's loss, added one-way p99 and
// jitter each way) with ours' ratios to upstream and to the oracle.
func WriteScores(w io.Writer, ms []Measure) {
	ms = Combine(ms)
	fmt.Fprintln(w, "\n| scenario | controller | U | added p50 | p90 | p95 | p99 | ping loss | score | call ↓ loss | ↓ p99 | ↓ jitter | call ↑ loss | ↑ p99 | ↑ jitter |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, m := range ms {
		fmt.Fprintf(w, "| %s | %s | %.3f | %s | %s | %s | %s | %.1f %% | %.3f | %.1f %% | %s | %.1f | %.1f %% | %s | %.1f |\n", m.Scenario, m.Controller, m.U,
			msf(m.P50), msf(m.P90), msf(m.P95), msf(m.P99), 100*m.Loss, m.Score,
			100*m.CallDown.Loss, msf(m.CallDown.P99), m.CallDown.Jitter, 100*m.CallUp.Loss, msf(m.CallUp.P99), m.CallUp.Jitter)
	}
	fmt.Fprintln(w)
	for _, sc := range scenarios(ms) {
		up, or := Ratios(ms, sc)
		fmt.Fprintf(w, "%s: ours/upstream %s, ours/oracle %s (score ratios).\n", sc, times(up), times(or))
	}
}

// WriteCalibration prints the calibration table: every scenario and
// controller on the kernel and in the simulator side by side (U, added
// p50/p90/p99 in ms, probe loss, score), then per scenario the two ratios
// on each and the simulator's disagreement, sim/kernel − 1, marked ✗ where
// it is beyond CalibrationTolerance.
func WriteCalibration(w io.Writer, kernel, simulated []Measure) {
	kernel, simulated = Combine(kernel), Combine(simulated)
	fmt.Fprintln(w, "| scenario | controller | U kernel / sim | added p50 kernel / sim | p90 | p99 | probe loss kernel / sim | score kernel / sim |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, sc := range scenarios(kernel) {
		for _, k := range kernel {
			if k.Scenario != sc {
				continue
			}
			s := find(simulated, sc, k.Controller)
			if s == nil {
				fmt.Fprintf(w, "| %s | %s | %.3f / — | %s / — | %s / — | %s / — | %.1f %% / — | %.3f / — |\n", sc, k.Controller, k.U, msf(k.P50), msf(k.P90), msf(k.P99), 100*k.Loss, k.Score)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %.3f / %.3f | %s / %s | %s / %s | %s / %s | %.1f %% / %.1f %% | %.3f / %.3f |\n", sc, k.Controller,
				k.U, s.U, msf(k.P50), msf(s.P50), msf(k.P90), msf(s.P90), msf(k.P99), msf(s.P99), 100*k.Loss, 100*s.Loss, k.Score, s.Score)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | ours/upstream kernel | sim | disagreement | ours/oracle kernel | sim | disagreement |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, sc := range scenarios(kernel) {
		ku, ko := Ratios(kernel, sc)
		su, so := Ratios(simulated, sc)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", sc, times(ku), times(su), disagreement(su, ku), times(ko), times(so), disagreement(so, ko))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "The call's loss in its loaded direction (download; upload when only it is loaded), kernel / sim and the simulator's disagreement (✗ beyond ±%.0f %%, both below %.1f %% agree):\n\n", 100*LossTolerance, 100*LossFloor)
	fmt.Fprintln(w, "| scenario | controller | call loss kernel | sim | disagreement | ping loss kernel | sim |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, sc := range scenarios(kernel) {
		for _, k := range kernel {
			s := find(simulated, sc, k.Controller)
			if k.Scenario != sc || s == nil || k.Controller == ArmOff {
				continue
			}
			kl, sl := k.callLoss(), s.callLoss()
			fmt.Fprintf(w, "| %s | %s | %.1f %% | %.1f %% | %s | %.1f %% | %.1f %% |\n", sc, k.Controller, 100*kl, 100*sl, lossDisagreement(sl, kl), 100*k.Loss, 100*s.Loss)
		}
	}
}

// callLoss is the call's loss in the direction the scenario loads:
// the download's, unless only the upload carries flows.
func (m Measure) callLoss() float64 {
	if m.Goodput == 0 && m.UploadGoodput > 0 {
		return m.CallUp.Loss
	}
	return m.CallDown.Loss
}

// lossDisagreement is sim/kernel − 1 for a loss, marked ✗ beyond
// LossTolerance; two losses below LossFloor agree.
func lossDisagreement(sim, kernel float64) string {
	if sim < LossFloor && kernel < LossFloor {
		return "both < " + fmt.Sprintf("%.1f %%", 100*LossFloor)
	}
	if kernel == 0 {
		return "— ✗"
	}
	return relative(sim, kernel, LossTolerance)
}

func disagreement(sim, kernel float64) string { return relative(sim, kernel, CalibrationTolerance) }

// relative is sim/kernel − 1 in percent, marked ✗ beyond tolerance ("—"
// when either is unknown or the kernel's is 0).
func relative(sim, kernel, tolerance float64) string {
	if math.IsNaN(sim) || math.IsNaN(kernel) || kernel == 0 {
		return "—"
	}
	d := sim/kernel - 1
	mark := ""
	if math.Abs(d) > tolerance {
		mark = " ✗"
	}
	return fmt.Sprintf("%+.0f %%%s", 100*d, mark)
}

func times(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}

func msf(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%+.0f", v)
	}
	return fmt.Sprintf("%+.1f", v)
}
