// SPDX-License-Identifier: Apache-2.0

// Package linkmodel holds the simulator's built-in links: seeded models of
// Starlink, LTE, cable and DSL whose capacity statistics are calibrated to
// the real traces of ../shared/reference/benchmark.md §7.3 (Starlink and
// LTE) or to a provisioned-rate wired link (cable, DSL, for which there are
// no traces). They ship as code, so `make demo` needs no trace files, and a
// seed always gives the same link on every machine.
//
// A model's capacity is built in two layers. A slow 1-s process moves a
// quantile index u through [0, 1] as a reflected random walk (whose
// stationary distribution is uniform), with a jump at each reconfiguration
// instant for Starlink; the 1-s capacity is the trace's quantile function at
// u, so the 1-s percentiles match the published ones by construction. On
// top, a 100 ms layer adds the sub-second structure: small fluctuation and,
// for cellular links, short radio outages.
package linkmodel

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/trace"
)

// Names lists the built-in models.
var Names = []string{"starlink", "lte", "cable", "dsl"}

// step is the resolution of the models' rate series.
const step = 100 * time.Millisecond

// length is how much capacity a model generates; runs loop over it.
const length = 15 * time.Minute

// dirModel describes one direction of a model.
type dirModel struct {
	// knots of the 1-s quantile function, Mbit/s, at u = 0, .05, .25, .5,
	// .75, .95, 1 (the min, p5, p25, p50, p75, p95, max of §7.3).
	knots [7]float64
	// walk is the step of the reflected random walk of u per second.
	walk float64
	// epochJump is the largest jump of u at a reconfiguration instant
	// (Starlink) or at a random handover (jumpRate per second, cellular).
	epochJump float64
	jumpRate  float64
	// jitter is the relative 100 ms fluctuation (uniform ±jitter).
	jitter float64
	// outage is the probability per 100 ms of a radio outage starting, and
	// outageLen its longest length in 100 ms steps (uniform 1..outageLen).
	outage    float64
	outageLen int
}

var quantileAt = [7]float64{0, 0.05, 0.25, 0.5, 0.75, 0.95, 1}

type model struct {
	class     string
	down, up  dirModel
	baseRTT   time.Duration
	starlink  bool       // 15-s reconfiguration of capacity and delay
	rttSpread [2]float64 // extra base RTT per reconfiguration epoch, ms: uniform [a, b)
	loss      [2]float64 // random loss per direction (shape.Direction index)
	buffer    time.Duration
	bounds    [2]sim.Bounds // what a user would configure (shape.Direction index); zero = p5/p25/p95
}

var models = map[string]model{
	// Starlink on the Road (benchmark.md §7.3): DL mean 268.2, p5 75.7,
	// p25 210.7, p50 285.9, p75 335.9, p95 407.8, max 501.6, CV 0.36,
	// median |1-s step| 20.3, p99 1-s drop 0.69; UL mean 18.1, p5 4.9,
	// p25 11.6, p50 16.9, p75 23.8, p95 35.0, max 57.3. Minimum RTT about
	// 40 ms, changing at each reconfiguration (ping.csv: best RTT p5 42.8,
	// p95 53.9 ms). No random loss by default: LeoCC's 0.01 % down / 0.2 %
	// up (Link.Loss) caps four CUBIC flows far below the capacity MaCake's
	// measurement saw filled; the command line can add it. Starlink's
	// buffer depth is unknown (benchmark.md §6.1 sweeps 0.25, 1 and 4 s);
	// the model takes the shallowest of the sweep, 250 ms of mean
	// capacity. MaCake's unshaped phase (+39 ms median, +56 ms p90 RTT)
	// points to an even shallower one, which --buffer 50ms models; there a
	// delay-threshold controller has little left to remove
	// (docs/MEASUREMENTS.md). The road trace itself is replayed with the
	// protocol's 1 s.
	"starlink": {
		class: "starlink",
		down: dirModel{
			knots: [7]float64{0, 75.7, 210.7, 285.9, 335.9, 407.8, 501.6},
			walk:  0.11, epochJump: 0.4, jitter: 0.05,
		},
		up: dirModel{
			knots: [7]float64{0, 4.9, 11.6, 16.9, 23.8, 35.0, 57.3},
			walk:  0.05, epochJump: 0.4, jitter: 0.05,
		},
		baseRTT:   40 * time.Millisecond,
		starlink:  true,
		rttSpread: [2]float64{0, 12},
		buffer:    250 * time.Millisecond,
	},
	// T-Mobile LTE (mahimahi TMobile-LTE-short, §7.3): DL mean 16.65, p5
	// 4.12, p25 10.09, p50 13.81, p75 22.17, p95 36.66, max 59.11, median
	// |1-s step| 3.30, 3.6 % empty 100 ms bins; UL mean 13.32, p5 2.48,
	// p25 7.30, p50 11.50, p75 20.62, p95 27.53, max 29.75, 0.5 % empty.
	"lte": {
		class: "lte",
		down: dirModel{
			knots: [7]float64{1.48, 4.12, 10.09, 13.81, 22.17, 36.66, 59.11},
			walk:  0.2, epochJump: 0.7, jumpRate: 0.04, jitter: 0.35, outage: 0.012, outageLen: 5,
		},
		up: dirModel{
			knots: [7]float64{0.61, 2.48, 7.30, 11.50, 20.62, 27.53, 29.75},
			walk:  0.11, epochJump: 0.5, jumpRate: 0.03, jitter: 0.25, outage: 0.002, outageLen: 4,
		},
		baseRTT: 50 * time.Millisecond,
	},
	// DOCSIS cable provisioned at 200/20 Mbit/s: nearly constant, with the
	// few-percent dips of a shared segment. No trace backs it. Bounds as a
	// user would set them: base 90 % of the plan, max the plan, min a
	// quarter.
	"cable": {
		class: "cable",
		down: dirModel{
			knots: [7]float64{150, 182, 194, 198, 201, 204, 206},
			walk:  0.05, jitter: 0.03,
		},
		up: dirModel{
			knots: [7]float64{16, 18.5, 19.5, 20, 20.3, 20.6, 21},
			walk:  0.05, jitter: 0.03,
		},
		baseRTT: 20 * time.Millisecond,
		bounds: [2]sim.Bounds{
			shape.Upload:   {Min: 5_000_000, Base: 18_000_000, Max: 20_000_000},
			shape.Download: {Min: 50_000_000, Base: 180_000_000, Max: 200_000_000},
		},
	},
	// VDSL2 synchronised at 50/10 Mbit/s: constant. No trace backs it.
	// Bounds as for cable: base 90 % of the sync rate, max the sync rate.
	"dsl": {
		class: "dsl",
		down: dirModel{
			knots: [7]float64{50, 50, 50, 50, 50, 50, 50},
		},
		up: dirModel{
			knots: [7]float64{10, 10, 10, 10, 10, 10, 10},
		},
		baseRTT: 25 * time.Millisecond,
		bounds: [2]sim.Bounds{
			shape.Upload:   {Min: 2_500_000, Base: 9_000_000, Max: 10_000_000},
			shape.Download: {Min: 12_500_000, Base: 45_000_000, Max: 50_000_000},
		},
	},
}

// New builds the named model with a seed.
func New(name string, seed uint64) (*sim.Link, error) {
	m, ok := models[strings.ToLower(name)]
	if !ok {
		return nil, fmt.Errorf("unknown link model %q; want one of %s", name, strings.Join(Names, ", "))
	}
	l := &sim.Link{
		Name:    strings.ToLower(name),
		Class:   m.class,
		BaseRTT: m.baseRTT,
		Loss:    m.loss,
		Buffer:  m.buffer,
		Bounds:  m.bounds,
	}
	r := sim.NewStream(seed, 0x6d6f64656c) // "model"
	l.Capacity[shape.Download] = m.down.generate(l.Name+".down", shape.Download, m.starlink, r)
	l.Capacity[shape.Upload] = m.up.generate(l.Name+".up", shape.Upload, m.starlink, r)
	for _, d := range shape.Directions {
		l.Capacity[d].Class = m.class
	}
	if m.starlink {
		l.RTTSteps, l.RTTPeriod = StarlinkDelay(m.baseRTT, m.rttSpread, seed, length)
	}
	return l, nil
}

// ReconfigSecond is the second within each 15 s at which Starlink
// reconfigures (seconds 12, 27, 42 and 57 of every minute).
const ReconfigSecond = 12

// StarlinkDelay returns base-RTT steps at every Starlink reconfiguration
// instant over a period: each epoch's RTT is base plus a uniform extra in
// spread (ms).
func StarlinkDelay(base time.Duration, spread [2]float64, seed uint64, period time.Duration) ([]sim.RTTStep, time.Duration) {
	r := sim.NewStream(seed, 0x64656c6179) // "delay"
	var steps []sim.RTTStep
	extra := func() time.Duration {
		return time.Duration(sim.Uniform(r, spread[0], spread[1]) * float64(time.Millisecond))
	}
	steps = append(steps, sim.RTTStep{At: 0, RTT: base + extra()})
	for at := ReconfigSecond * time.Second; at < period; at += 15 * time.Second {
		steps = append(steps, sim.RTTStep{At: at, RTT: base + extra()})
	}
	return steps, period
}

// generate builds one direction's capacity trace.
func (m dirModel) generate(name string, d shape.Direction, starlink bool, r *rand.Rand) *trace.Trace {
	seconds := int(length / time.Second)
	per := int(time.Second / step)

	// The slow layer: a reflected random walk of u, one value per second,
	// with jumps at reconfigurations or handovers.
	path := make([]float64, seconds)
	u := r.Float64()
	for s := range seconds {
		jump := starlink && s%15 == ReconfigSecond%15
		if !starlink && m.jumpRate > 0 && r.Float64() < m.jumpRate {
			jump = true
		}
		if jump {
			u = reflect(u + sim.Uniform(r, -m.epochJump, m.epochJump))
		} else if s > 0 {
			u = reflect(u + sim.Uniform(r, -m.walk, m.walk))
		}
		path[s] = u
	}
	// Replace each value by its rank, so that u is exactly uniform over
	// the generated period whatever the seed: the 1-s percentiles then
	// equal the knots, and only the order of the levels is random.
	order := make([]int, seconds)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return path[order[a]] < path[order[b]] })
	for rank, i := range order {
		path[i] = (float64(rank) + 0.5) / float64(seconds)
	}

	rates := make([]int64, 0, seconds*per)
	outage := 0
	for s := range seconds {
		level := m.quantile(path[s])
		for range per {
			c := level
			if m.jitter > 0 {
				c = level * (1 + sim.Uniform(r, -m.jitter, m.jitter))
			}
			if m.outage > 0 {
				if outage == 0 && r.Float64() < m.outage {
					outage = 1 + r.IntN(m.outageLen)
				}
				if outage > 0 {
					c = 0
					outage--
				}
			}
			if c < 0 {
				c = 0
			}
			rates = append(rates, int64(c*1e6))
		}
	}
	return &trace.Trace{Name: name, Direction: d, Rates: rates, Step: step}
}

// quantile maps u in [0, 1] to Mbit/s by linear interpolation between the
// knots.
func (m dirModel) quantile(u float64) float64 {
	i := sort.SearchFloat64s(quantileAt[:], u)
	if i <= 0 {
		return m.knots[0]
	}
	if i >= len(quantileAt) {
		return m.knots[len(m.knots)-1]
	}
	lo, hi := quantileAt[i-1], quantileAt[i]
	f := (u - lo) / (hi - lo)
	return m.knots[i-1] + float64(f*(m.knots[i]-m.knots[i-1]))
}

// reflect folds x back into [0, 1]; a reflected symmetric random walk keeps
// a uniform distribution.
func reflect(x float64) float64 {
	for x < 0 || x > 1 {
		if x < 0 {
			x = -x
		}
		if x > 1 {
			x = 2 - x
		}
	}
	return x
}

// Constant returns a link with constant capacity in each direction (bit/s),
// for tests and calibration.
func Constant(name string, down, up int64, rtt time.Duration) *sim.Link {
	mk := func(d shape.Direction, r int64) *trace.Trace {
		return &trace.Trace{Name: name + "." + d.String(), Direction: d, Class: "constant", Rates: []int64{r}, Step: time.Second}
	}
	return &sim.Link{
		Name:     name,
		Class:    "constant",
		Capacity: [2]*trace.Trace{shape.Upload: mk(shape.Upload, up), shape.Download: mk(shape.Download, down)},
		BaseRTT:  rtt,
	}
}

// Steps returns a link whose download capacity follows the given levels
// (bit/s), each held for hold, looping; the upload is constant.
func Steps(name string, levels []int64, hold time.Duration, up int64, rtt time.Duration) *sim.Link {
	l := Constant(name, levels[0], up, rtt)
	l.Capacity[shape.Download] = &trace.Trace{Name: name + ".download", Direction: shape.Download, Class: "constant", Rates: levels, Step: hold}
	return l
}
