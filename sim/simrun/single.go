// SPDX-License-Identifier: Apache-2.0

package simrun

import (
	"fmt"
	"strings"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/autorate"
	"github.com/macake/macake/sim/linkmodel"
)

// Single is one link's comparison, built and checked: every arm on the same
// link and seed, and the off/on/off run of one of them. Everything that can
// be wrong with the request is found by NewSingle, before the minutes of
// simulation that Run may take.
type Single struct {
	spec Spec
	// Link is what every arm replays.
	Link *sim.Link
	// Options are the options the arms share; the policy arm probes with
	// the policy's own reflectors and interval.
	Options sim.Options
	// Arms are the controllers compared, in table order.
	Arms []sim.Arm
	// Policy is the --policy file's link, nil without one.
	Policy *config.Link
	// PhaseArm is the controller of the off/on/off run, nil for none.
	PhaseArm  *sim.Arm
	policyCfg tuning.Config
	jobs      []sim.Job
}

// Outcome is what a Single run measured.
type Outcome struct {
	// Results has one result per arm, in the order of Single.Arms.
	Results []*sim.Result
	// Phased is the off/on/off run of Single.PhaseArm, or nil.
	Phased *sim.Result
}

// NewSingle checks s and builds its run: the arms, the link, the policy's
// controller, and one job per arm plus the off/on/off job. Its errors are
// UsageErrors for the flags (an unknown --link model too), ConfigErrors for
// the policy, and plain errors for a trace that cannot be loaded.
func NewSingle(s Spec) (*Single, error) {
	arms, opt, err := s.prepare(DefaultControllers())
	if err != nil {
		return nil, err
	}
	link, loaded, err := s.buildLink()
	if err != nil {
		return nil, err
	}
	r := &Single{spec: s, Link: link}
	if s.Policy != "" {
		pol, cfg, err := s.applyPolicy(&opt, link)
		if err != nil {
			return nil, ConfigError{err}
		}
		r.Policy = pol
		if !hasArm(arms, policyArm) {
			arms = append(arms, sim.Arm{})
		}
		for i := range arms {
			if arms[i].Name == policyArm || arms[i].Name == "" {
				arms[i] = sim.Arm{Name: policyArm, Factory: autorate.ConfigFactory(cfg)}
			}
		}
		r.policyCfg = cfg
	}
	if s.Direction == "" {
		opt.Flows = [2]int{}
		for _, d := range shape.Directions {
			if loaded[d] {
				opt.Flows[d] = s.Flows
			}
		}
	}
	opt.Series = s.Series
	if err := opt.Validate(); err != nil {
		return nil, UsageError{err}
	}
	r.Options, r.Arms = opt, arms
	for _, a := range arms {
		j := sim.Job{Link: link, Options: r.armOptions(a), Arm: a}
		if err := j.Options.Validate(); err != nil {
			return nil, ConfigError{fmt.Errorf("%s: %w", a.Name, err)}
		}
		r.jobs = append(r.jobs, j)
	}
	if pa, ok := phasesArm(s.Phases, arms); ok {
		r.PhaseArm = &pa
		popt := r.armOptions(pa)
		popt.Series = false
		// Phases of at least 30 s, so that the switch's transient (the
		// link's queue draining) does not dominate a phase.
		popt.Duration = max(opt.Duration, 90*time.Second)
		third := popt.Duration / 3
		popt.Phases = [2]time.Duration{third, 2 * third}
		r.jobs = append(r.jobs, sim.Job{Link: link, Options: popt, Arm: pa})
	} else if s.Phases != "auto" && s.Phases != "none" {
		return nil, UsageError{fmt.Errorf("--phases %s: not among the controllers run (%s)", s.Phases, armNames(arms))}
	}
	return r, nil
}

// armOptions are the options of arm a's run.
func (r *Single) armOptions(a sim.Arm) sim.Options {
	o := a.Options(r.Options)
	if a.Name == policyArm {
		// The policy's prober: its active reflectors, each probed
		// every probe_interval.
		o.Reflectors, o.ProbeInterval = r.policyCfg.Pingers, r.policyCfg.PingInterval
	}
	return o
}

// Run runs every job, in parallel on up to Spec.Workers goroutines.
func (r *Single) Run() (Outcome, error) {
	results, err := sim.RunAll(r.jobs, r.spec.Workers)
	if err != nil {
		return Outcome{}, err
	}
	var out Outcome
	if r.PhaseArm != nil {
		out.Phased = results[len(results)-1]
		results = results[:len(results)-1]
	}
	out.Results = results
	return out, nil
}

// buildLink makes the link of a single run and says which directions carry
// real capacity (those get the flows unless --direction says otherwise).
func (s *Spec) buildLink() (*sim.Link, [2]bool, error) {
	var (
		l      *sim.Link
		loaded [2]bool
		err    error
	)
	if s.Trace != "" {
		l, loaded, err = linkmodel.LoadTraceLink(s.Trace, s.Seed)
		if err != nil {
			return nil, loaded, err
		}
		if s.Rebin > 0 {
			for _, d := range shape.Directions {
				if p := l.Capacity[d].Period(); loaded[d] && s.Rebin > p/10 {
					return nil, loaded, UsageError{fmt.Errorf("--rebin %v: the %s trace lasts %v; want a step of at most a tenth of it (%v), or the rebinned trace is a few flat steps with a different mean",
						s.Rebin, d, p, (p / 10).Truncate(time.Millisecond))}
				}
				if len(l.Capacity[d].Opportunities) > 0 || l.Capacity[d].Step%s.Rebin != 0 {
					l.Capacity[d] = l.Capacity[d].Rebin(s.Rebin)
				}
			}
		}
	} else {
		l, err = linkmodel.New(s.Link, s.Seed)
		if err != nil {
			// The only way New fails is a name it does not know: the flag.
			return nil, loaded, UsageError{fmt.Errorf("--link %s: %w", s.Link, err)}
		}
		loaded = [2]bool{true, true}
	}
	if err := s.applyPath(l); err != nil {
		return nil, loaded, err
	}
	return l, loaded, nil
}

// applyPath applies --base-rtt and --loss to a link.
func (s *Spec) applyPath(l *sim.Link) error {
	if s.BaseRTT > 0 {
		shift := s.BaseRTT - l.MinRTT()
		l.BaseRTT = s.BaseRTT
		for i := range l.RTTSteps {
			l.RTTSteps[i].RTT += shift
		}
	}
	if s.Loss != "" {
		l.Loss = s.lossProb
	}
	return l.Validate()
}

// Title is the one-line summary of the run's setup, with the policy when
// one is given: the header of the table and the JSON's "setup".
func (r *Single) Title() string {
	s, l, opt := &r.spec, r.Link, r.Options
	var src string
	if s.Trace != "" {
		src = fmt.Sprintf("%s (trace)", l.Name)
	} else {
		src = fmt.Sprintf("%s (built-in model, seed %d)", l.Name, s.Seed)
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
	title := fmt.Sprintf("%s · %v · %s %s flows · buffer %v of mean capacity · %s · pipe queue %s · actuation %v",
		src, opt.Duration, r.flows(), strings.ToUpper(opt.CC.String()), buf, rtt, opt.Queue, s.ActuationDelay)
	if p := r.Policy; p != nil {
		title += fmt.Sprintf(" · policy %s (%s, %s law)", p.Name, p.Shaper.Mode, p.Autorate.Controller)
	}
	return title
}

// SVGTitle is the picture's title: the link and the load, short enough
// for the top of a plot.
func (r *Single) SVGTitle() string {
	s, l, opt := &r.spec, r.Link, r.Options
	src := l.Name + " (trace)"
	if s.Trace == "" {
		src = fmt.Sprintf("%s (built-in model, seed %d)", l.Name, s.Seed)
	}
	return fmt.Sprintf("%s: %s %s flows, %v", src, r.flows(), strings.ToUpper(opt.CC.String()), opt.Duration)
}

// flows says the load, e.g. "4 download + 4 upload".
func (r *Single) flows() string {
	var flows []string
	for _, d := range []shape.Direction{shape.Download, shape.Upload} {
		if r.Options.Flows[d] > 0 {
			flows = append(flows, fmt.Sprintf("%d %s", r.Options.Flows[d], d))
		}
	}
	return strings.Join(flows, " + ")
}

// Document is the JSON form of an Outcome (`macake sim --json`).
type Document struct {
	Setup   string        `json:"setup"`
	Results []*sim.Result `json:"results"`
	Phases  *sim.Result   `json:"off_on_off,omitempty"`
}

// Document returns the outcome as JSON reads it, without the time series:
// those are for the SVG, and would bury the metrics. The outcome itself
// keeps them.
func (r *Single) Document(out Outcome) Document {
	doc := Document{Setup: r.Title(), Phases: out.Phased}
	for _, res := range out.Results {
		c := *res
		c.Series = nil
		doc.Results = append(doc.Results, &c)
	}
	return doc
}
