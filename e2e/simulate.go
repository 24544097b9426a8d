// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/controller/autoqueue"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/score"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/autorate"
	simtrace "github.com/macake/macake/sim/trace"
	"github.com/macake/macake/state"
)

// The controllers a scenario compares, by the names the tables use: no
// shaper, macake watch under upstream's law and under macake's, and the
// oracle.
const (
	ArmOff      = "off"
	ArmUpstream = "upstream"
	ArmOurs     = "ours"
	ArmOracle   = "oracle"
)

// OracleShare is the oracle's rate as a share of the true capacity, and
// OracleQueue its queue in time at that rate: a shaper that knows C(t),
// set like the reference point of reference/benchmark.md §6.4(e) (0.9·C,
// a 10 ms client queue).
const (
	OracleShare = 0.9
	OracleQueue = 10 * time.Millisecond
)

// OracleQueueBytes is the oracle's queue at rate (bit/s): the simulator's
// rule for a 10 ms target with the sparse reserve macake's auto queue
// keeps on Linux's bfifo (autoqueue.SparseReserve), so the kernel's
// oracle and its twin agree and it differs from watch's pipes in its
// rate only.
func OracleQueueBytes(rate int64) int64 {
	return autoqueue.SparseReserve(oracleQueue.Size(rate, 0), tuning.DefaultMTU)
}

// oracleQueue is the oracle's queue rule in the twin.
var oracleQueue = sim.QueueRule{Target: OracleQueue, Reserve: true}

// Measure is what one phase of a scenario measured, on the kernel or in
// the simulator, in the same terms: U is the goodput over the trace's mean
// capacity (the mean of both directions' when both are loaded), the delays
// are the ping's added round trip at each percentile over every ping sent
// (a lost one counting as the lost delay, package score), loss the share
// of pings that did not come back, the score U/(1 + p95/30 ms)
// (reference/benchmark.md §4.2, with the round trip a ping sees), and
// CallDown and CallUp what the call felt each way.
type Measure struct {
	Scenario   string `json:"scenario"`
	Controller string `json:"controller"`
	// Goodput and UploadGoodput are TCP payload rates, Mbit/s.
	Goodput       float64 `json:"goodput_mbit"`
	UploadGoodput float64 `json:"upload_goodput_mbit"`
	U             float64 `json:"u"`
	P50           float64 `json:"added_p50_ms"`
	P90           float64 `json:"added_p90_ms"`
	P95           float64 `json:"added_p95_ms"`
	P99           float64 `json:"added_p99_ms"`
	Loss          float64 `json:"probe_loss"`
	Score         float64 `json:"score"`
	// CallDown and CallUp are the call's loss, added one-way delay
	// percentiles and jitter in each direction (measures written before
	// the call existed read as zero).
	CallDown score.Flow `json:"call_down"`
	CallUp   score.Flow `json:"call_up"`
}

func (m *Measure) score() {
	m.Score = score.Score(m.U, time.Duration(m.P95*float64(time.Millisecond)))
}

// LostDelay is what a lost ping or call packet counts as on the kernel
// and in the twin (-e2e.lost-delay; 0: score.DefaultLostDelay).
var LostDelay time.Duration

// KernelMeasure is a kernel phase in the calibration's terms.
func KernelMeasure(sc Scenario, controller string, p Phase) Measure {
	a := p.Added()
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	m := Measure{Scenario: sc.Spec, Controller: controller, Goodput: p.Goodput / 1e6, UploadGoodput: p.UploadGoodput / 1e6,
		P50: msf(a.P50), P90: msf(a.P90), P95: msf(a.P95), P99: msf(a.P99), Loss: p.Loaded.LossPercent() / 100,
		CallDown: p.Call[shape.Download], CallUp: p.Call[shape.Upload]}
	m.U = p.Goodput / float64(sc.Trace.Mean(true))
	if sc.UpFlows > 0 && sc.DownFlows > 0 {
		m.U = (m.U + p.UploadGoodput/float64(sc.Trace.Mean(false))) / 2
	} else if sc.DownFlows == 0 {
		m.U = p.UploadGoodput / float64(sc.Trace.Mean(false))
	}
	m.score()
	return m
}

// simMeasure is a simulated run in the calibration's terms.
func simMeasure(sc Scenario, controller string, r *sim.Result) Measure {
	dn, up := r.Dir[shape.Download], r.Dir[shape.Upload]
	m := Measure{Scenario: sc.Spec, Controller: controller, Goodput: dn.Goodput, UploadGoodput: up.Goodput,
		P50: r.RTT50, P90: r.RTT90, P95: r.RTT95, P99: r.RTT99, Loss: r.RTTLoss,
		CallDown: dn.Call, CallUp: up.Call}
	var u []float64
	for _, d := range []shape.Direction{shape.Download, shape.Upload} {
		if x := r.Dir[d]; x.Loaded && x.Capacity > 0 {
			u = append(u, x.Goodput/x.Capacity)
		}
	}
	for _, v := range u {
		m.U += v / float64(len(u))
	}
	m.score()
	return m
}

// SimLink is the testbed as the simulator models it: the trace's two
// directions after idle seconds at its first rates (the phase's idle
// window), a base RTT of 0.1 ms (veth pairs), and the ISP's bfifo of one
// second of the trace's peak in each direction.
func (sc Scenario) SimLink(idle time.Duration) (*sim.Link, error) {
	tr := sc.Trace
	step := idle
	for _, s := range tr.Steps {
		step = gcd(step, s.At)
	}
	step = gcd(step, tr.Length)
	if step < time.Millisecond {
		return nil, fmt.Errorf("scenario %s: trace steps finer than 1 ms", sc.Spec)
	}
	l := &sim.Link{Name: "e2e/" + sc.Spec, Class: "testbed", BaseRTT: 100 * time.Microsecond}
	for _, d := range []shape.Direction{shape.Download, shape.Upload} {
		t := &simtrace.Trace{Name: tr.Name, Direction: d, Class: "testbed", Step: step}
		down := d == shape.Download
		n := int((idle + tr.Length) / step)
		for i := range n {
			at := time.Duration(i)*step - idle
			t.Rates = append(t.Rates, pick(down, tr.At(max(at, 0))))
		}
		l.Capacity[d] = t
		l.BufferBytes[d] = tr.Max(down) / 8
	}
	return l, l.Validate()
}

func gcd(a, b time.Duration) time.Duration {
	for b != 0 {
		a, b = b, a%b
	}
	if a < 0 {
		return -a
	}
	return a
}

// SimOptions are the simulator's settings for the testbed's twin: the
// phase's idle window before the flows start (left out of the metrics),
// htb + bfifo shaping, the ping and the call as the testbed sends them,
// reflectors next to the path (no spread, spikes or
// loss) that answer ICMP timestamps as Linux does, on the client's own
// clock, so the daemon's prober measures each direction's one-way delay
// (sense/probe prefers timestamps), tc's
// actuation in about 2 ms, an auto queue sized from the path's own idle
// RTT, as watch sizes it once its controller has 20 replies (within the
// phase's idle window on the kernel, so before the load starts), and the
// probes sent as watch's prober sends them (probe.Pace).
func (sc Scenario) SimOptions(idle time.Duration, seed uint64) sim.Options {
	interval := config.Defaults.Autorate.ProbeInterval.Std()
	burst, _ := probe.Pace(len(Reflectors), interval)
	return sim.Options{
		Reflectors:      len(Reflectors),
		ProbeInterval:   interval,
		ProbeBurst:      burst,
		Duration:        idle + sc.Trace.Length,
		Warmup:          idle,
		FlowStart:       idle,
		Flows:           [2]int{shape.Download: sc.DownFlows, shape.Upload: sc.UpFlows},
		Seed:            seed,
		Shaper:          sim.ShaperHTB,
		ReflectorSpread: 10 * time.Microsecond,
		ReflectorJitter: 20 * time.Microsecond,
		ReflectorSpikes: -1,
		ProbeLoss:       -1,
		ProbeOWD:        true,
		ReflectorClock:  -1,
		ActuationDelay:  2 * time.Millisecond,
		MeasureInterval: PingInterval,
		CallInterval:    CallInterval,
		LostDelay:       LostDelay,
	}
}

// ProbeBurst, when set, is how many probes the twin's prober sends at
// once (sim.Options.ProbeBurst) instead of as watch's does (probe.Pace):
// 6 measures again what the old rounds cost, 1 samples as cake-autorate
// does (docs/MEASUREMENTS.md, "Probe rounds").
var ProbeBurst int

// LawQueue is the queue rule of the twin's watch arms: the daemon's
// `queue = "auto"` (sim.DefaultQueue) unless a tuning run tries another.
var LawQueue = sim.DefaultQueue

// SimArm is one controller of the twin: its factory and the queue rule
// its pipes run with.
type SimArm struct {
	Name    string
	Factory sim.Factory
	Queue   sim.QueueRule
}

// SimArms builds the twin's controllers for sc: no shaper, the policy
// watch runs under each law (desired.ControllerConfig on an unmeasured
// network, MTU 1500, as watch builds it), the oracle, and any variants
// ("ours+Switch-Switch" or "upstream+Switch": a law with improvement
// switches turned on or off; "ours#QUEUE": a law with another queue rule,
// sim.SplitArm; for tuning in the twin).
func SimArms(sc Scenario, variants ...string) ([]SimArm, error) {
	arms := []SimArm{{Name: ArmOff, Factory: mustBaseline("none")}}
	for _, name := range append([]string{ArmUpstream, ArmOurs}, variants...) {
		ctl, queue, err := sim.SplitArm(name)
		if err != nil {
			return nil, err
		}
		if queue == nil {
			queue = &LawQueue
		}
		tw := autorate.Tweak{Arm: ctl}
		if ctl != ArmUpstream && ctl != ArmOurs {
			if tw, err = autorate.ParseTweak(ctl); err != nil {
				return nil, err
			}
		}
		law := map[string]config.ControlLaw{ArmUpstream: config.LawUpstream, ArmOurs: config.LawMacake}[tw.Arm]
		cfg, err := lawConfig(sc, law)
		if err != nil {
			return nil, err
		}
		if err := tw.Apply(&cfg); err != nil {
			return nil, fmt.Errorf("variant %q: %w", name, err)
		}
		arms = append(arms, SimArm{Name: name, Factory: autorate.ConfigFactory(cfg), Queue: *queue})
	}
	oracle, err := sim.Baseline(fmt.Sprintf("oracle-frac%g", OracleShare))
	if err != nil {
		return nil, err
	}
	arms = append(arms, SimArm{Name: ArmOracle, Factory: oracle, Queue: oracleQueue})
	return arms, nil
}

// lawConfig is the controller watch builds from AutoratePolicy(sc, law, Reflectors).
func lawConfig(sc Scenario, law config.ControlLaw) (tuning.Config, error) {
	pol, _, err := config.Parse("links.d/e2e.toml", []byte(AutoratePolicy(sc.Trace, law, Reflectors)), config.LoadOptions{Target: config.TargetLinux})
	if err != nil {
		return tuning.Config{}, err
	}
	return desired.ControllerConfig(pol, state.Profile{Link: pol.Name}, 1500, desired.BackendFacts{Limits: tc.Limits})
}

func mustBaseline(name string) sim.Factory {
	f, err := sim.Baseline(name)
	if err != nil {
		panic(err)
	}
	return f
}

// Simulate runs sc's twin with every arm (and the variants) and seeds
// seeds and returns one Measure per arm and seed, in arm order.
func Simulate(sc Scenario, idle time.Duration, seeds int, variants ...string) ([]Measure, error) {
	link, err := sc.SimLink(idle)
	if err != nil {
		return nil, err
	}
	arms, err := SimArms(sc, variants...)
	if err != nil {
		return nil, err
	}
	var jobs []sim.Job
	for _, a := range arms {
		for s := range seeds {
			opt := sc.SimOptions(idle, uint64(s+1))
			opt.Queue = a.Queue
			if ProbeBurst > 0 {
				opt.ProbeBurst = ProbeBurst
			}
			jobs = append(jobs, sim.Job{Link: link, Options: opt, Arm: sim.Arm{Name: a.Name, Factory: a.Factory}})
		}
	}
	results, err := sim.RunAll(jobs, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Measure, len(results))
	for i, r := range results {
		out[i] = simMeasure(sc, jobs[i].Arm.Name, r)
	}
	return out, nil
}
