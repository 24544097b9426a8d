// SPDX-License-Identifier: Apache-2.0

// Package simrun carries out a `macake sim` request: it checks the run as the
// user asked for it (Spec), picks the controllers to compare, builds the
// link (a built-in model or a trace, rebinned, with the path's RTT and
// loss) and the controller a --policy file makes, and runs one link
// (Single) or a directory of traces (Bench). Package main only declares
// the flags, maps errors to exit codes and prints.
//
// Its job is to run the command's request, so its errors name the flags
// the user gave ("--flows 0: want 1–256 …"): the text a person reads is
// the one that tells them what to change. UsageError and ConfigError say
// which of the user's inputs was wrong.
//
// It is a package of its own, not part of package sim, because it stands
// on everything below it: the engine (sim), the built-in links
// (linkmodel), the production controller (autorate), the trace benchmark
// (bench), and, for --policy, the policy files (config) and the daemon's
// controller configuration (reconcile). sim cannot import its own
// sub-packages, and the engine should not know about policy files.
package simrun

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/score"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
)

// Spec is a run as the user asks for it, in the flags' own terms: strings
// are parsed and zero values mean "the default" as the flags document it.
type Spec struct {
	// Link, Trace and Traces choose what runs: a built-in model, one
	// capacity trace (FILE[:COLUMN]), or a directory of traces. At most one
	// may be set; with none, Check picks the starlink model.
	Link, Trace, Traces string
	// Policy is a links.d file whose controller runs as the arm "policy".
	Policy string

	// Duration, Warmup and Offset are the simulated time per run, its
	// unmeasured start, and where in the trace it begins.
	Duration, Warmup, Offset time.Duration
	// Buffer, BaseRTT and Rebin: 0 keeps the link's own.
	Buffer, BaseRTT, Rebin time.Duration
	// ActuationDelay 0 means no delay at all (not sim's default).
	ActuationDelay time.Duration
	// LostDelay is what a lost probe or call packet counts as in the
	// percentiles and the score (0: score.DefaultLostDelay).
	LostDelay time.Duration
	// ProbeBurst is how many probes go out at once (sim.Options.ProbeBurst):
	// 0 or 1 as cake-autorate sends them, 2 as macake watch does.
	ProbeBurst int

	// Flows are the bulk TCP flows per loaded direction.
	Flows int
	// Direction is "both", "download", "upload", or "" for the link's
	// loaded directions (both for a model, the trace's own for a trace).
	Direction string
	// CC, Queue and Shaper are read by sim.ParseCC, sim.ParseQueueRule
	// and sim.ParseShaper.
	CC, Queue, Shaper string
	// Controllers is the comma-separated list of arms ("" the default of
	// the mode: DefaultControllers, or the benchmark's set with Traces).
	Controllers string
	// Candidates, with Traces, are the variants the leave-one-source-out
	// estimate chooses among ("" DefaultCandidates, "none" no estimate);
	// they run as arms besides Controllers.
	Candidates string
	// Phases names the arm of the off/on/off run: "auto", "none" or a name.
	Phases string
	// Loss is "DOWN,UP" probabilities, or "" for the link's own.
	Loss string

	// Seed seeds a single run; a benchmark runs Seeds seeds and Offsets
	// start offsets per trace. Workers bounds the parallel runs (0: one
	// per CPU).
	Seed                    uint64
	Seeds, Offsets, Workers int
	// Series keeps the time series of a single run, for a picture.
	Series bool

	lossProb [2]float64 // Loss, parsed by Check, by shape.Direction
}

// UsageError marks an error in the request itself: a flag's value or a
// combination of flags, including one found only once a trace is loaded
// (e.g. --rebin longer than the trace), as opposed to a file that cannot be
// read or a run that fails.
type UsageError struct{ Err error }

// Error returns the wrapped error's text unchanged: it names the flag.
func (e UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error, for errors.Is on its cause.
func (e UsageError) Unwrap() error { return e.Err }

// ConfigError marks an error in the --policy file or in the run it
// configures: the file needs fixing, not the flags.
type ConfigError struct{ Err error }

// Error returns the wrapped error's text unchanged: it names the file.
func (e ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error, for errors.Is on its cause.
func (e ConfigError) Unwrap() error { return e.Err }

// usage wraps a non-nil err as a UsageError.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return UsageError{err}
}

// Check rejects flag combinations no run can use, as UsageErrors. It also
// settles what the flags leave open: the starlink model when no link is
// named, and the parsed --loss. NewSingle and NewBench call it.
func (s *Spec) Check() error { return usage(s.check()) }

func (s *Spec) check() error {
	set := 0
	for _, v := range []string{s.Link, s.Trace, s.Traces} {
		if v != "" {
			set++
		}
	}
	if set > 1 {
		return errors.New("give one of --link, --trace and --traces")
	}
	if set == 0 {
		s.Link = "starlink"
	}
	if s.Flows < 1 || s.Flows > 256 {
		return fmt.Errorf("--flows %d: want 1–256 bulk TCP flows (the metrics are taken under load)", s.Flows)
	}
	if s.Duration <= 0 || s.Duration > 24*time.Hour {
		return fmt.Errorf("--duration %v: want more than 0 and at most a day", s.Duration)
	}
	if s.Warmup < 0 {
		return fmt.Errorf("--warmup %v: want 0 or more", s.Warmup)
	}
	if s.Duration <= s.Warmup {
		return fmt.Errorf("--duration %v must be longer than the warm-up (%v)", s.Duration, s.Warmup)
	}
	if s.Duration-s.Warmup < sim.MinMeasured {
		return fmt.Errorf("--duration %v with --warmup %v measures only %v; want at least %v after the warm-up", s.Duration, s.Warmup, s.Duration-s.Warmup, sim.MinMeasured)
	}
	if s.Offset < 0 {
		return fmt.Errorf("--offset %v: want 0 or more (the start, from the beginning of the trace)", s.Offset)
	}
	if s.Buffer != 0 && (s.Buffer < sim.MinBuffer || s.Buffer > time.Minute) {
		return fmt.Errorf("--buffer %v: want %v–1m of the mean capacity (cellular buffers hold seconds)", s.Buffer, sim.MinBuffer)
	}
	if s.ActuationDelay < 0 || s.ActuationDelay > 10*time.Second {
		return fmt.Errorf("--actuation-delay %v: want 0 (none) to 10s", s.ActuationDelay)
	}
	if s.ProbeBurst < 0 || s.ProbeBurst > sim.DefaultReflectors {
		return fmt.Errorf("--probe-burst %d: want 1 (one probe every 50 ms, as cake-autorate) to %d (every reflector at once)", s.ProbeBurst, sim.DefaultReflectors)
	}
	if s.LostDelay < 0 || s.LostDelay > time.Minute {
		return fmt.Errorf("--lost-delay %v: want a delay up to 1m (what a lost packet counts as; 0: the default %v)", s.LostDelay, score.DefaultLostDelay)
	}
	if s.BaseRTT < 0 || s.BaseRTT > 10*time.Second {
		return fmt.Errorf("--base-rtt %v: want a positive RTT up to 10s (0: the link's own)", s.BaseRTT)
	}
	if s.Rebin < 0 || (s.Rebin > 0 && s.Trace == "") {
		return errors.New("--rebin needs --trace and a positive step")
	}
	if s.Rebin > 0 && s.Rebin%time.Millisecond != 0 {
		return fmt.Errorf("--rebin %v: want whole milliseconds", s.Rebin)
	}
	if s.Loss != "" {
		parts := strings.Split(s.Loss, ",")
		if len(parts) != 2 {
			return fmt.Errorf("--loss %q: want DOWN,UP, e.g. 0.0001,0.002", s.Loss)
		}
		for i, d := range []shape.Direction{shape.Download, shape.Upload} {
			p, err := strconv.ParseFloat(strings.TrimSpace(parts[i]), 64)
			if err != nil || !(p >= 0 && p < 1) {
				return fmt.Errorf("--loss %q: %q is not a probability from 0 to below 1", s.Loss, parts[i])
			}
			s.lossProb[d] = p
		}
	}
	if s.Seeds < 1 || s.Offsets < 1 {
		return errors.New("--seeds and --offsets must be at least 1")
	}
	switch s.Direction {
	case "", "both", "download", "upload":
	default:
		return fmt.Errorf("--direction %q: want both, download or upload", s.Direction)
	}
	return nil
}

// options are the sim.Options every arm starts from. With Direction ""
// the flows are left to the link (NewSingle) or the trace (bench).
func (s *Spec) options() (sim.Options, error) {
	cc, err := sim.ParseCC(s.CC)
	if err != nil {
		return sim.Options{}, usage(err)
	}
	q, err := sim.ParseQueueRule(s.Queue)
	if err != nil {
		return sim.Options{}, usage(err)
	}
	shaper, err := sim.ParseShaper(s.Shaper)
	if err != nil {
		return sim.Options{}, UsageError{fmt.Errorf("--%w", err)}
	}
	act := s.ActuationDelay
	if act == 0 {
		act = -1 // an explicit zero: no delay
	}
	opt := sim.Options{
		Duration: s.Duration, CC: cc, Buffer: s.Buffer, Seed: s.Seed, Offset: s.Offset,
		ActuationDelay: act, Queue: q, Warmup: s.Warmup, Shaper: shaper, ProbeBurst: s.ProbeBurst, LostDelay: s.LostDelay,
	}
	switch s.Direction {
	case "both":
		opt.Flows = [2]int{s.Flows, s.Flows}
	case "download":
		opt.Flows[shape.Download] = s.Flows
	case "upload":
		opt.Flows[shape.Upload] = s.Flows
	}
	return opt, nil
}

// prepare is the part of a request both modes share, in the order the
// errors are reported: the flags, the controllers, the policy arm's need
// for a policy, and the options.
func (s *Spec) prepare(defaultList string) ([]sim.Arm, sim.Options, error) {
	if err := s.Check(); err != nil {
		return nil, sim.Options{}, err
	}
	list := s.Controllers
	if list == "" {
		list = defaultList
	}
	arms, err := arms(list)
	if err != nil {
		return nil, sim.Options{}, usage(err)
	}
	if hasArm(arms, policyArm) && (s.Policy == "" || s.Traces != "") {
		return nil, sim.Options{}, UsageError{fmt.Errorf("--controllers %s: needs --policy FILE (and one link)", policyArm)}
	}
	opt, err := s.options()
	if err != nil {
		return nil, sim.Options{}, err
	}
	return arms, opt, nil
}
