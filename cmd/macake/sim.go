// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/controller/sim"
	"github.com/macake/macake/controller/sim/autorate"
	"github.com/macake/macake/controller/sim/bench"
	"github.com/macake/macake/controller/sim/linkmodel"
	"github.com/macake/macake/controller/sim/report"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

var simCmd = &command{
	name:  "sim",
	args:  "[--link starlink|lte|cable|dsl | --trace FILE[:COLUMN] | --traces DIR] [flags]",
	short: "Run controllers against a recorded or modelled link, offline.",
	long: `Replays a link (a built-in seeded model, or a capacity trace) packet by
packet with TCP flows, the macOS dummynet pipes in front of it and each
controller in the loop, fed only what the daemon sees. The controllers run
side by side on the same link and seed and are compared by the metrics of
the benchmark: utilisation U, added delay D50/D95/D99 from an independent
100 Hz probe, recovery after capacity drops, rate changes, and the score
U/(1 + D95/30 ms). A second run shows the drift-controlled off / on / off
table (throughput, added median and p90), as MaCake reports it.

Deterministic: the same flags and seed give the same numbers on any machine.

With --traces DIR, every trace in the directory (../shared/traces) runs with
several seeds and start offsets, and one table compares the controllers per
trace (median score, win rule of benchmark.md §4.2).

Examples:
  macake sim --link starlink --svg starlink.svg
  macake sim --trace ../shared/traces/mahimahi/TMobile-LTE-short.down
  macake sim --traces ../shared/traces --controllers upstream,ours`,
}

func init() { simCmd.run = runSim }

// simFlags are the parsed flags of `macake sim`.
type simFlags struct {
	link, traceSpec, tracesDir, policy string
	duration, buffer, baseRTT          time.Duration
	actuation, offset, warmup          time.Duration
	flows                              int
	direction, cc, queue, controllers  string
	phases, svg, loss                  string
	seed                               uint64
	seeds, offsets, workers            int
	json                               bool
	rebin                              time.Duration
	lossProb                           [2]float64 // --loss, parsed, by shape.Direction
}

// usageError marks an error found only after a trace is loaded that is still
// the user's flag, not the file (e.g. --rebin longer than the trace).
type usageError struct{ error }

func runSim(e *env, args []string) int {
	c := simCmd
	fs := c.flags()
	var f simFlags
	fs.StringVar(&f.link, "link", "", "built-in link model: "+strings.Join(linkmodel.Names, ", "))
	fs.StringVar(&f.traceSpec, "trace", "", "capacity trace `FILE[:COLUMN]` (mahimahi or a rate-series CSV)")
	fs.StringVar(&f.tracesDir, "traces", "", "run every trace in `DIR` (e.g. ../shared/traces) and print one table")
	fs.StringVar(&f.policy, "policy", "", "links.d policy `FILE`: adds the controller `macake watch` builds from it (arm \"policy\"); upstream and ours take its rate bounds")
	durationVar(fs, &f.duration, "duration", 60*time.Second, "simulated time per run")
	fs.IntVar(&f.flows, "flows", 4, "bulk TCP flows per loaded direction")
	fs.StringVar(&f.direction, "direction", "", "loaded directions: both, download or upload (default: both for --link, the trace's own for a trace)")
	fs.StringVar(&f.cc, "cc", "cubic", "congestion control of the flows: cubic or reno")
	durationVar(fs, &f.buffer, "buffer", 0, "bottleneck buffer, in time at mean capacity, 10ms–1m (default: 1 s; the starlink model 250 ms)")
	durationVar(fs, &f.baseRTT, "base-rtt", 0, "base RTT of the path (default: the model's or the trace class's)")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed (link model, jitter, losses, flow starts)")
	durationVar(fs, &f.offset, "offset", 0, "where in the trace to start")
	fs.StringVar(&f.controllers, "controllers", "", "comma-separated controllers to compare (default "+defaultControllers()+"); available: "+strings.Join(availableControllers(), ", ")+
		"; and variants such as upstream+CutToAchieved or ours-CutToAchieved (switches: "+strings.Join(autorate.Switches(), ", ")+")")
	fs.StringVar(&f.queue, "queue", "auto", "pipe queue at each rate change: auto (the daemon's: min of the BDP and 20 ms), bdp, a delay target like 10ms, or a size like 256KB")
	durationVar(fs, &f.actuation, "actuation-delay", 10*time.Millisecond, "time from a controller's decision to the pipe running at the new rate")
	durationVar(fs, &f.warmup, "warmup", 2*time.Second, "start of the run left out of the metrics")
	fs.StringVar(&f.loss, "loss", "", "random loss at the bottleneck, `DOWN,UP` probabilities (e.g. 0.0001,0.002 as LeoCC models Starlink)")
	fs.StringVar(&f.phases, "phases", "auto", "controller for the off/on/off table (auto, none to skip)")
	fs.StringVar(&f.svg, "svg", "", "write rates, capacity and added delay over time to `FILE`")
	fs.BoolVar(&f.json, "json", false, "print the results as JSON")
	durationVar(fs, &f.rebin, "rebin", 0, "replay the trace as one rate per `STEP` (e.g. 100ms, as a tc testbed does) instead of its exact delivery opportunities")
	fs.IntVar(&f.seeds, "seeds", 5, "with --traces: seeds per trace")
	fs.IntVar(&f.offsets, "offsets", 3, "with --traces: start offsets per trace")
	fs.IntVar(&f.workers, "workers", 0, "parallel runs (default: one per CPU)")
	if done, code := c.parse(e, fs, args); done {
		return code
	}
	if done, code := c.noArgs(e, fs); done {
		return code
	}
	if err := f.check(fs); err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		return exitUsage
	}
	if f.controllers == "" && f.tracesDir != "" {
		f.controllers = benchControllers
	}
	arms, err := simArms(f.controllers)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		return exitUsage
	}
	if hasArm(arms, policyArm) && (f.policy == "" || f.tracesDir != "") {
		fmt.Fprintf(e.stderr, "macake sim: --controllers %s: needs --policy FILE (and one link)\n", policyArm)
		return exitUsage
	}
	opt, err := f.options()
	if err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		return exitUsage
	}
	if f.tracesDir != "" {
		if f.policy != "" {
			fmt.Fprintln(e.stderr, "macake sim: --policy sets one link's bounds; with --traces every trace takes its own (p5/p25/p95)")
			return exitUsage
		}
		return runTraceBench(e, f, opt, arms)
	}
	link, loaded, err := f.buildLink()
	if err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		if errors.As(err, new(usageError)) {
			return exitUsage
		}
		return exitFailure
	}
	var (
		pol    *config.Link
		polCfg controller.Config
	)
	if f.policy != "" {
		if pol, polCfg, err = f.applyPolicy(&opt, link); err != nil {
			fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
			return exitConfig
		}
		if !hasArm(arms, policyArm) {
			arms = append(arms, sim.Arm{})
		}
		for i := range arms {
			if arms[i].Name == policyArm || arms[i].Name == "" {
				arms[i] = sim.Arm{Name: policyArm, Factory: autorate.ConfigFactory(polCfg)}
			}
		}
	}
	if f.direction == "" {
		opt.Flows = [2]int{}
		for _, d := range shape.Directions {
			if loaded[d] {
				opt.Flows[d] = f.flows
			}
		}
	}
	opt.Series = f.svg != ""
	if err := opt.Validate(); err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		return exitUsage
	}

	armOptions := func(a sim.Arm) sim.Options {
		o := opt
		if a.Name == policyArm {
			// The policy's prober: its active reflectors, each probed
			// every probe_interval.
			o.Reflectors, o.ProbeInterval = polCfg.Pingers, polCfg.PingInterval
		}
		return o
	}
	jobs := make([]sim.Job, len(arms))
	for i, a := range arms {
		jobs[i] = sim.Job{Link: link, Options: armOptions(a), Arm: a}
		if err := jobs[i].Options.Validate(); err != nil {
			fmt.Fprintf(e.stderr, "macake sim: %s: %v\n", a.Name, err)
			return exitConfig
		}
	}
	var phaseArm *sim.Arm
	if pa, ok := phasesArm(f.phases, arms); ok {
		phaseArm = &pa
		popt := armOptions(pa)
		popt.Series = false
		// Phases of at least 30 s, so that the switch's transient (the
		// link's queue draining) does not dominate a phase.
		popt.Duration = max(opt.Duration, 90*time.Second)
		third := popt.Duration / 3
		popt.Phases = [2]time.Duration{third, 2 * third}
		jobs = append(jobs, sim.Job{Link: link, Options: popt, Arm: pa})
	} else if f.phases != "auto" && f.phases != "none" {
		fmt.Fprintf(e.stderr, "macake sim: --phases %s: not among the controllers run (%s)\n", f.phases, armNames(arms))
		return exitUsage
	}
	results, err := sim.RunAll(jobs, f.workers)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		return exitFailure
	}
	var phased *sim.Result
	if phaseArm != nil {
		phased = results[len(results)-1]
		results = results[:len(results)-1]
	}

	title := f.describe(link, opt)
	if pol != nil {
		title += fmt.Sprintf(" · policy %s (%s, %s law)", pol.Name, pol.Shaper.Mode, pol.Autorate.Controller)
	}
	if f.svg != "" {
		if err := writeSVG(f.svg, f.svgTitle(link, opt), results); err != nil {
			fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
			return exitFailure
		}
	}
	if f.json {
		return printSimJSON(e, title, opt, results, phased)
	}
	fmt.Fprintf(e.stdout, "macake sim: %s\n\n", title)
	if pol != nil {
		fmt.Fprintf(e.stdout, "%s\n\n", policyLimits)
	}
	report.Comparison(e.stdout, results)
	if phased != nil {
		fmt.Fprintln(e.stdout)
		report.Phases(e.stdout, phaseArm.Name, phased)
	}
	if f.svg != "" {
		fmt.Fprintf(e.stdout, "\nWrote %s.\n", f.svg)
	}
	return exitOK
}

// check rejects flag combinations no run can use.
func (f *simFlags) check(fs *flag.FlagSet) error {
	set := 0
	for _, s := range []string{f.link, f.traceSpec, f.tracesDir} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		return errors.New("give one of --link, --trace and --traces")
	}
	if set == 0 {
		f.link = "starlink"
	}
	if f.flows < 1 || f.flows > 256 {
		return fmt.Errorf("--flows %d: want 1–256 bulk TCP flows (the metrics are taken under load)", f.flows)
	}
	if f.duration <= 0 || f.duration > 24*time.Hour {
		return fmt.Errorf("--duration %v: want more than 0 and at most a day", f.duration)
	}
	if f.warmup < 0 {
		return fmt.Errorf("--warmup %v: want 0 or more", f.warmup)
	}
	if f.duration <= f.warmup {
		return fmt.Errorf("--duration %v must be longer than the warm-up (%v)", f.duration, f.warmup)
	}
	if f.duration-f.warmup < sim.MinMeasured {
		return fmt.Errorf("--duration %v with --warmup %v measures only %v; want at least %v after the warm-up", f.duration, f.warmup, f.duration-f.warmup, sim.MinMeasured)
	}
	if f.offset < 0 {
		return fmt.Errorf("--offset %v: want 0 or more (the start, from the beginning of the trace)", f.offset)
	}
	if f.buffer != 0 && (f.buffer < sim.MinBuffer || f.buffer > time.Minute) {
		return fmt.Errorf("--buffer %v: want %v–1m of the mean capacity (cellular buffers hold seconds)", f.buffer, sim.MinBuffer)
	}
	if f.actuation < 0 || f.actuation > 10*time.Second {
		return fmt.Errorf("--actuation-delay %v: want 0 (none) to 10s", f.actuation)
	}
	if f.baseRTT < 0 || f.baseRTT > 10*time.Second {
		return fmt.Errorf("--base-rtt %v: want a positive RTT up to 10s (0: the link's own)", f.baseRTT)
	}
	if f.rebin < 0 || (f.rebin > 0 && f.traceSpec == "") {
		return errors.New("--rebin needs --trace and a positive step")
	}
	if f.rebin > 0 && f.rebin%time.Millisecond != 0 {
		return fmt.Errorf("--rebin %v: want whole milliseconds", f.rebin)
	}
	if f.loss != "" {
		parts := strings.Split(f.loss, ",")
		if len(parts) != 2 {
			return fmt.Errorf("--loss %q: want DOWN,UP, e.g. 0.0001,0.002", f.loss)
		}
		for i, d := range []shape.Direction{shape.Download, shape.Upload} {
			p, err := strconv.ParseFloat(strings.TrimSpace(parts[i]), 64)
			if err != nil || !(p >= 0 && p < 1) {
				return fmt.Errorf("--loss %q: %q is not a probability from 0 to below 1", f.loss, parts[i])
			}
			f.lossProb[d] = p
		}
	}
	if f.seeds < 1 || f.offsets < 1 {
		return errors.New("--seeds and --offsets must be at least 1")
	}
	switch f.direction {
	case "", "both", "download", "upload":
	default:
		return fmt.Errorf("--direction %q: want both, download or upload", f.direction)
	}
	return nil
}

func (f *simFlags) options() (sim.Options, error) {
	cc, err := sim.ParseCC(f.cc)
	if err != nil {
		return sim.Options{}, err
	}
	q, err := sim.ParseQueueRule(f.queue)
	if err != nil {
		return sim.Options{}, err
	}
	act := f.actuation
	if act == 0 {
		act = -1 // an explicit zero: no delay
	}
	opt := sim.Options{
		Duration: f.duration, CC: cc, Buffer: f.buffer, Seed: f.seed, Offset: f.offset,
		ActuationDelay: act, Queue: q, Warmup: f.warmup,
	}
	switch f.direction {
	case "both":
		opt.Flows = [2]int{f.flows, f.flows}
	case "download":
		opt.Flows[shape.Download] = f.flows
	case "upload":
		opt.Flows[shape.Upload] = f.flows
	}
	return opt, nil
}

// policyArm is the name of the arm --policy adds.
const policyArm = "policy"

// policyLimits says which parts of a policy the simulator cannot honour.
const policyLimits = `policy: every [shaper], [autorate] and [balanced] key applies to the "policy" arm as in
macake watch; [match] and [cake] do not (no network to match, no CAKE in a dummynet pipe), the
reflector addresses only name the simulator's modelled reflectors, and shaper.overhead/mpu lower
the pipe rate as the daemon does while the simulated link itself carries no framing overhead.`

func hasArm(arms []sim.Arm, name string) bool {
	for _, a := range arms {
		if a.Name == name {
			return true
		}
	}
	return false
}

// applyPolicy loads --policy, builds the controller configuration the
// daemon would run (reconcile.ControllerConfig, on a network measured at the
// link's mean capacity, MTU 1500) and puts the policy's rate bounds (and a
// fixed queue size) into opt for the other autorate arms.
func (f *simFlags) applyPolicy(opt *sim.Options, link *sim.Link) (*config.Link, controller.Config, error) {
	pol, _, err := config.LoadFile(f.policy, config.LoadOptions{SkipOwnershipCheck: true})
	if err != nil {
		return nil, controller.Config{}, err
	}
	profile := state.Profile{
		Link:             pol.Name,
		DownloadCapacity: int64(link.Mean(shape.Download)),
		UploadCapacity:   int64(link.Mean(shape.Upload)),
		PeakDownload:     int64(link.Mean(shape.Download)),
		PeakUpload:       int64(link.Mean(shape.Upload)),
		IdleRTT:          link.MinRTT(),
	}
	cfg, err := reconcile.ControllerConfig(pol, profile, 1500)
	if err != nil {
		return nil, controller.Config{}, fmt.Errorf("%s: %w", f.policy, err)
	}
	for _, d := range shape.Directions {
		dc := cfg.Download
		if d == shape.Upload {
			dc = cfg.Upload
		}
		opt.Bounds[d] = sim.Bounds{Min: dc.Min, Base: dc.Base, Max: dc.Max}
	}
	if q := pol.Shaper.Queue; !q.Auto && q.Size > 0 && f.queue == "auto" {
		opt.Queue = sim.QueueRule{Bytes: min(int64(q.Size), sim.MaxQueueBytes)}
	}
	return &pol, cfg, nil
}

// buildLink makes the link of a single run and says which directions carry
// real capacity (those get the flows unless --direction says otherwise).
func (f *simFlags) buildLink() (*sim.Link, [2]bool, error) {
	var (
		l      *sim.Link
		loaded [2]bool
		err    error
	)
	if f.traceSpec != "" {
		l, loaded, err = linkmodel.LoadTraceLink(f.traceSpec, f.seed)
		if err != nil {
			return nil, loaded, err
		}
		if f.rebin > 0 {
			for _, d := range shape.Directions {
				if p := l.Capacity[d].Period(); loaded[d] && f.rebin > p/10 {
					return nil, loaded, usageError{fmt.Errorf("--rebin %v: the %s trace lasts %v; want a step of at most a tenth of it (%v), or the rebinned trace is a few flat steps with a different mean",
						f.rebin, d, p, (p / 10).Truncate(time.Millisecond))}
				}
				if len(l.Capacity[d].Opportunities) > 0 || l.Capacity[d].Step%f.rebin != 0 {
					l.Capacity[d] = l.Capacity[d].Rebin(f.rebin)
				}
			}
		}
	} else {
		l, err = linkmodel.New(f.link, f.seed)
		if err != nil {
			return nil, loaded, err
		}
		loaded = [2]bool{true, true}
	}
	if err := f.applyPath(l); err != nil {
		return nil, loaded, err
	}
	return l, loaded, nil
}

// applyPath applies --base-rtt and --loss to a link.
func (f *simFlags) applyPath(l *sim.Link) error {
	if f.baseRTT > 0 {
		shift := f.baseRTT - l.MinRTT()
		l.BaseRTT = f.baseRTT
		for i := range l.RTTSteps {
			l.RTTSteps[i].RTT += shift
		}
	}
	if f.loss != "" {
		l.Loss = f.lossProb
	}
	return l.Validate()
}

// describe is the one-line summary of a run's setup.
func (f *simFlags) describe(l *sim.Link, opt sim.Options) string {
	var src string
	if f.traceSpec != "" {
		src = fmt.Sprintf("%s (trace)", l.Name)
	} else {
		src = fmt.Sprintf("%s (built-in model, seed %d)", l.Name, f.seed)
	}
	var flows []string
	for _, d := range []shape.Direction{shape.Download, shape.Upload} {
		if opt.Flows[d] > 0 {
			flows = append(flows, fmt.Sprintf("%d %s", opt.Flows[d], d))
		}
	}
	rtt := fmt.Sprintf("base RTT %v", l.MinRTT())
	if len(l.RTTSteps) > 0 {
		rtt += " (+0–12 ms, changing every 15 s)"
	}
	buf := opt.Buffer
	if buf <= 0 {
		buf = l.Buffer
	}
	if buf <= 0 {
		buf = time.Second
	}
	return fmt.Sprintf("%s · %v · %s %s flows · buffer %v of mean capacity · %s · pipe queue %s · actuation %v",
		src, opt.Duration, strings.Join(flows, " + "), strings.ToUpper(opt.CC.String()), buf, rtt, opt.Queue, f.actuation)
}

// svgTitle is the picture's title: the link and the load.
func (f *simFlags) svgTitle(l *sim.Link, opt sim.Options) string {
	src := l.Name + " (trace)"
	if f.traceSpec == "" {
		src = fmt.Sprintf("%s (built-in model, seed %d)", l.Name, f.seed)
	}
	var flows []string
	for _, d := range []shape.Direction{shape.Download, shape.Upload} {
		if opt.Flows[d] > 0 {
			flows = append(flows, fmt.Sprintf("%d %s", opt.Flows[d], d))
		}
	}
	return fmt.Sprintf("%s: %s %s flows, %v", src, strings.Join(flows, " + "), strings.ToUpper(opt.CC.String()), opt.Duration)
}

func writeSVG(path, title string, results []*sim.Result) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write svg: %w", err)
	}
	if err := report.SVG(out, title, results); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write svg: %w", err)
	}
	return nil
}

func printSimJSON(e *env, title string, opt sim.Options, results []*sim.Result, phased *sim.Result) int {
	for _, r := range results {
		r.Series = nil
	}
	doc := struct {
		Setup   string        `json:"setup"`
		Results []*sim.Result `json:"results"`
		Phases  *sim.Result   `json:"off_on_off,omitempty"`
	}{title, results, phased}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// phasesArm picks the controller of the off/on/off table.
func phasesArm(name string, arms []sim.Arm) (sim.Arm, bool) {
	switch name {
	case "none":
		return sim.Arm{}, false
	case "auto":
		for _, pref := range []string{policyArm, "ours", "upstream", "oracle-lag0.5", "oracle"} {
			for _, a := range arms {
				if a.Name == pref {
					return a, true
				}
			}
		}
		return sim.Arm{}, false
	}
	for _, a := range arms {
		if a.Name == name {
			return a, true
		}
	}
	return sim.Arm{}, false
}

func armNames(arms []sim.Arm) string {
	var n []string
	for _, a := range arms {
		n = append(n, a.Name)
	}
	return strings.Join(n, ", ")
}

// simArms resolves --controllers.
func simArms(list string) ([]sim.Arm, error) {
	if list == "" {
		list = defaultControllers()
	}
	var arms []sim.Arm
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		f, err := controllerFactory(name)
		if err != nil {
			return nil, err
		}
		arms = append(arms, sim.Arm{Name: name, Factory: f})
	}
	if len(arms) == 0 {
		return nil, errors.New("--controllers: name at least one controller")
	}
	return arms, nil
}

// controllerFactory maps a controller name to its factory: the baselines
// of the simulator and the autorate controllers.
func controllerFactory(name string) (sim.Factory, error) {
	if f, err := sim.Baseline(name); err == nil {
		return f, nil
	}
	if f, ok := autorateArms[name]; ok {
		return f, nil
	}
	if name == policyArm { // built by --policy
		return nil, nil
	}
	if strings.HasPrefix(name, "upstream") || strings.HasPrefix(name, "ours") {
		f, err := autorate.Variant(name)
		if err != nil {
			return nil, fmt.Errorf("--controllers: %w", err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("--controllers: unknown controller %q; available: %s", name, strings.Join(availableControllers(), ", "))
}

// autorateArms holds the controllers built on the production controller
// package, by name: upstream (the faithful port) and ours.
var autorateArms = autorate.Arms()

func availableControllers() []string {
	names := append([]string(nil), sim.Baselines...)
	for _, n := range []string{"upstream", "ours"} {
		if _, ok := autorateArms[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

// benchControllers are the default arms of --traces: every baseline of
// benchmark.md §6.2 that the table needs, and the two autorate controllers.
const benchControllers = "none,fixed,fixed-p5,upstream,ours,oracle,oracle-lag0.5"

func defaultControllers() string {
	if _, ok := autorateArms["ours"]; ok {
		return "none,fixed,upstream,ours,oracle"
	}
	return "none,fixed,fixed-p5,oracle,oracle-lag0.5"
}

// runTraceBench runs every trace of --traces with every controller.
func runTraceBench(e *env, f simFlags, opt sim.Options, arms []sim.Arm) int {
	cases, err := bench.Cases(f.tracesDir)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		return exitFailure
	}
	if f.svg != "" {
		fmt.Fprintln(e.stderr, "macake sim: --svg draws one run; it is ignored with --traces")
	}
	cfg := bench.Config{Options: opt, Flows: f.flows, Seeds: f.seeds, Offsets: f.offsets, Arms: arms, Workers: f.workers}
	fmt.Fprintf(e.stderr, "macake sim: %d traces × %d controllers × %d seeds × %d offsets = %d runs of %v...\n",
		len(cases), len(arms), f.seeds, f.offsets, len(cases)*len(arms)*f.seeds*f.offsets, opt.Duration)
	start := time.Now()
	res, err := bench.Run(cases, cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(e.stderr, "macake sim: done in %v.\n", time.Since(start).Round(time.Second))
	if f.json {
		return printTraceBenchJSON(e, res)
	}
	report.Bench(e.stdout, res, "upstream", "ours")
	return exitOK
}

func printTraceBenchJSON(e *env, res *bench.Result) int {
	type armJSON struct {
		Controller string   `json:"controller"`
		U          float64  `json:"u"`
		D95        *float64 `json:"d95_ms"` // null: no run measured any delay
		D99        *float64 `json:"d99_ms"`
		Score      *float64 `json:"score"`
		ProbeLoss  float64  `json:"probe_loss"`
	}
	type caseJSON struct {
		Trace       string    `json:"trace"`
		Class       string    `json:"class"`
		Direction   string    `json:"direction"`
		Development bool      `json:"development"`
		Controllers []armJSON `json:"controllers"`
		Verdict     string    `json:"ours_vs_upstream,omitempty"`
	}
	var out struct {
		Traces  []caseJSON         `json:"traces"`
		GeoMean map[string]float64 `json:"geomean_score"`
	}
	out.GeoMean = map[string]float64{}
	ai, bi := res.ArmIndex("ours"), res.ArmIndex("upstream")
	for ci, row := range res.Outcomes {
		c := res.Cases[ci]
		cj := caseJSON{Trace: c.Name, Class: c.Class, Direction: c.Dir.String(), Development: c.Dev}
		for _, o := range row {
			s := o.Summary()
			a := armJSON{Controller: o.Arm, U: s.U, ProbeLoss: s.ProbeLoss}
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
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
		return exitFailure
	}
	return exitOK
}
