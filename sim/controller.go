// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/shape"
)

// Controller decides the pipes' rates from what macake's daemon sees on a
// Mac, and nothing else: the replies to its own probes (which are exempt
// from the pipes, so they see the bottleneck's queue but not the pipe's),
// the interface byte counters, and the passing of time. Times are durations
// since the start of the run.
type Controller interface {
	// Start is called once, before any sample; rates set here are applied
	// at once, as `macake apply` would before the daemon starts steering.
	Start(now time.Duration, pipes Actuator)
	// Delay delivers one reflector reply.
	Delay(s DelaySample)
	// Load delivers the interface byte counters (every 200 ms by default).
	Load(s LoadSample)
	// Tick lets time-driven logic run between samples (every 10 ms).
	Tick(now time.Duration)
}

// Actuator sets a pipe's rate, the way the daemon's `dnctl pipe N config`
// does: the change takes effect after the actuation delay, the rate is
// truncated to whole kbit/s, the queue is resized by the run's queue rule,
// and the packets already queued stay. A rate of 0 removes shaping.
type Actuator interface {
	SetRate(d shape.Direction, bitsPerSecond int64)
}

// DelaySample is one reflector reply as the daemon's prober reports it.
type DelaySample struct {
	Reflector int
	// Sent and At are when the probe left and when its reply arrived.
	Sent, At time.Duration
	// RTT is At − Sent.
	RTT time.Duration
	// HasOWD is set when the prober uses ICMP timestamps: then UpOWD and
	// DownOWD are the one-way delays in whole milliseconds, including the
	// reflector's unknown clock offset (only their changes mean anything).
	HasOWD         bool
	UpOWD, DownOWD time.Duration
}

// LoadSample is a reading of the shaped interface's byte counters. On a Mac
// the receive counter counts download bytes as they arrive from the link,
// before the download pipe (dummynet "in" runs after the interface counts),
// and the transmit counter counts upload bytes after the upload pipe.
type LoadSample struct {
	At                   time.Duration
	RxBytes, TxBytes     uint64
	RxPackets, TxPackets uint64
}

// Env is what a controller factory may know about a run before it starts:
// the rate bounds a user would configure and the idle baseline a
// `macake measure` would find. Capacity is the true capacity and is only for
// the oracle baselines.
type Env struct {
	Link *Link
	// Bounds are min/base/max per direction from the trace, as
	// benchmark.md §6.2 prescribes for the cake-autorate baseline:
	// min = p5, base = p25, max = p95 of the 1-s capacity, floored, over
	// the bins that are not outages (trace.ActivePercentile).
	Bounds [2]Bounds
	// Mean is the trace's mean capacity per direction, bit/s.
	Mean [2]float64
	// P5 is the 5th percentile of the 1-s capacity outside outages per
	// direction, bit/s (the fixed-p5 baseline's rate).
	P5 [2]float64
	// IdleRTT is the smallest base RTT of the path (or Options.IdleRTT).
	IdleRTT time.Duration
	// Capacity returns the true capacity of direction d in the 100 ms bin
	// that contains t, in bit/s. Only oracles may use it.
	Capacity func(d shape.Direction, t time.Duration) int64
	// Seed is the run's seed.
	Seed uint64
}

// Bounds are a controller's rate limits for one direction, in bit/s.
type Bounds struct {
	Min, Base, Max int64
}

// Factory builds a controller for one run.
type Factory func(env *Env) (Controller, error)

// MinRate is the floor of every rate the baselines derive from a trace: a
// dummynet pipe at 0 would mean "unlimited", and a percentile of a trace
// with outages can be 0.
const MinRate = 64_000

func floorRate(r float64) int64 {
	if math.IsNaN(r) || r < MinRate {
		return MinRate
	}
	return int64(r)
}

// ProbePauser is implemented by controllers that stop probing (a sleeping
// cake-autorate): while ProbesPaused is true the daemon sends no probes.
type ProbePauser interface{ ProbesPaused() bool }

// Monitor is implemented by controllers that want the byte counters at
// another period than Options.LoadInterval (cake-autorate floors it at low
// rates); it is asked once, after Start.
type Monitor interface{ MonitorInterval() time.Duration }

// immediate marks controllers whose decisions bypass the actuation delay
// (the oracles: their lag is their own parameter).
type immediate interface{ immediateActuation() bool }

// Baselines lists the built-in baselines by name, in table order. The
// oracle takes any lag and share of the capacity (ParseOracle); these are
// the variants the tables use.
var Baselines = []string{"none", "fixed", "fixed-p5", "oracle", "oracle-lag0.1", "oracle-lag0.3", "oracle-lag0.5", "oracle-lag1", "oracle-frac0.9", "oracle-frac0.9-lag0.3", "oracle-frac0.8-lag0.3-bounded"}

// OracleShare is the share of the true capacity the oracle sets by default.
const OracleShare = 0.95

// Oracle is an oracle baseline's parameters.
type Oracle struct {
	// Share is the share of the true capacity it sets (OracleShare).
	Share float64
	// Lag is how old the capacity it sees is.
	Lag time.Duration
	// Bounded keeps its rate within the min/max the controllers get
	// (Env.Bounds): the best a controller held to the same bounds could
	// do, where the plain oracle may go below a trace's p5 minimum.
	Bounded bool
}

// ParseOracle reads an oracle's name: "oracle", then optionally
// "-fracF" (the share of the capacity it sets, 0 < F ≤ 1; default
// OracleShare), "-lagS" (how many seconds old the capacity it sees is;
// default 0) and "-bounded", in that order: "oracle-frac0.9-lag0.3-bounded".
func ParseOracle(name string) (Oracle, error) {
	rest, ok := strings.CutPrefix(name, "oracle")
	if !ok {
		return Oracle{}, fmt.Errorf("%q is not an oracle", name)
	}
	o := Oracle{Share: OracleShare}
	bad := func() (Oracle, error) {
		return Oracle{}, fmt.Errorf("oracle %q: want oracle[-fracF][-lagS][-bounded], F in (0, 1], S seconds from 0 to 10, e.g. oracle-frac0.9-lag0.3", name)
	}
	rest, o.Bounded = strings.CutSuffix(rest, "-bounded")
	if v, ok := strings.CutPrefix(rest, "-frac"); ok {
		num, after, _ := strings.Cut(v, "-")
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return bad()
		}
		o.Share, rest = f, ""
		if after != "" {
			rest = "-" + after
		}
	}
	if v, ok := strings.CutPrefix(rest, "-lag"); ok {
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil || !(sec >= 0 && sec <= 10) {
			return bad()
		}
		o.Lag, rest = time.Duration(math.Round(sec*1000))*time.Millisecond, ""
	}
	if rest != "" {
		return bad()
	}
	return o, nil
}

// Baseline returns the factory of a built-in baseline.
func Baseline(name string) (Factory, error) {
	switch name {
	case "none":
		return func(*Env) (Controller, error) { return noShaping{}, nil }, nil
	case "fixed":
		return func(env *Env) (Controller, error) {
			return &fixed{rate: [2]int64{floorRate(0.95 * env.Mean[0]), floorRate(0.95 * env.Mean[1])}}, nil
		}, nil
	case "fixed-p5":
		return func(env *Env) (Controller, error) {
			return &fixed{rate: [2]int64{floorRate(env.P5[0]), floorRate(env.P5[1])}}, nil
		}, nil
	}
	if strings.HasPrefix(name, "oracle") {
		o, err := ParseOracle(name)
		if err != nil {
			return nil, err
		}
		return oracleFactory(o), nil
	}
	return nil, fmt.Errorf("unknown baseline %q", name)
}

// noShaping is the `none` baseline: no pipe at all.
type noShaping struct{}

func (noShaping) Start(time.Duration, Actuator) {}
func (noShaping) Delay(DelaySample)             {}
func (noShaping) Load(LoadSample)               {}
func (noShaping) Tick(time.Duration)            {}

// fixed shapes each direction at a constant rate.
type fixed struct{ rate [2]int64 }

func (f *fixed) Start(_ time.Duration, a Actuator) {
	for _, d := range shape.Directions {
		a.SetRate(d, f.rate[d])
	}
}
func (f *fixed) Delay(DelaySample)  {}
func (f *fixed) Load(LoadSample)    {}
func (f *fixed) Tick(time.Duration) {}

// oracle sets share·C(t − lag) every 100 ms (0.95·C(t) by default): a
// perfect estimator with a given loop delay, the unreachable corner of the
// trade-off.
type oracle struct {
	share float64
	lag   time.Duration
	cap   func(shape.Direction, time.Duration) int64
	a     Actuator
	last  int64
	// bounds, when set, clamp the rate to the min/max a controller gets.
	bounds *[2]Bounds
}

func oracleFactory(spec Oracle) Factory {
	return func(env *Env) (Controller, error) {
		if env.Capacity == nil {
			return nil, fmt.Errorf("oracle: no capacity function")
		}
		o := &oracle{share: spec.Share, lag: spec.Lag, cap: env.Capacity, last: -1}
		if spec.Bounded {
			o.bounds = &env.Bounds
		}
		return o, nil
	}
}

func (o *oracle) immediateActuation() bool { return true }

func (o *oracle) Start(now time.Duration, a Actuator) {
	o.a = a
	o.Tick(now)
}

func (o *oracle) Tick(now time.Duration) {
	seen := now - o.lag
	if seen < 0 {
		seen = 0
	}
	bin := int64(seen / (100 * time.Millisecond))
	if bin == o.last {
		return
	}
	o.last = bin
	for _, d := range shape.Directions {
		r := floorRate(o.share * float64(o.cap(d, seen)))
		if b := o.bounds; b != nil {
			r = min(max(r, b[d].Min), b[d].Max)
		}
		o.a.SetRate(d, r)
	}
}

func (o *oracle) Delay(DelaySample) {}
func (o *oracle) Load(LoadSample)   {}
