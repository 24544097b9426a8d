// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"maps"
	"os"
	"slices"
	"time"

	"github.com/macake/macake/controller"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// published is the owner's view as of its last step, for Status, which
// runs on other goroutines. It is never modified once stored.
type published struct {
	status statusapi.Status
	links  []publishedLink
}

type publishedLink struct {
	active ActiveLink
	err    string
	runner *linkRunner
	// unshaped maps a direction to why it is not shaped.
	unshaped map[string]string
}

// publish stores a copy of what status shows; it runs on the owner
// goroutine after every step that changes it.
func (d *Daemon) publish() {
	b := d.cfg.Backend
	st := statusapi.Status{
		FormatVersion: statusapi.FormatVersion,
		Daemon: statusapi.Daemon{
			Running: true, Socket: statusapi.SocketPath(d.cfg.StateDir), PID: os.Getpid(), Version: d.cfg.Version,
			StartedAt: d.started, ConfigDir: d.cfg.ConfigDir, StateDir: d.cfg.StateDir,
		},
		Backend:      statusapi.Backend{Name: b.Name, System: b.System, Scope: b.Scope},
		Interfaces:   slices.Clone(d.facts.Interfaces),
		Policies:     []statusapi.Policy{},
		Links:        []statusapi.Link{},
		ConfigErrors: []statusapi.ConfigError{},
		Problems:     []string{},
		DriftRepairs: map[string]int{},
		Profiles:     ProfilesStatus(d.cfg.Tokens.State),
	}
	for k, v := range d.driftCounts {
		st.DriftRepairs[k] = v
	}
	if st.Interfaces == nil {
		st.Interfaces = []linkfacts.InterfaceFacts{}
	}
	links := d.links()
	for i, l := range links {
		p := statusapi.Policy{Name: l.Name, File: l.File, Interface: l.Match.Interface, Mode: string(l.Shaper.Mode), Priority: l.Match.Priority}
		if sel := d.desire.Selection; i < len(sel.Verdicts) && len(sel.Verdicts) == len(links) {
			p.Active, p.Reason = sel.Verdicts[i].Active, sel.Verdicts[i].Reason
		}
		_, p.LastGood = d.inForce[l.File]
		st.Policies = append(st.Policies, p)
	}
	for _, file := range sortedKeys(d.inForce) {
		name := linkNameOf(file)
		kept := string(logging.KeptNothing)
		if _, ok := d.lastGood[name]; ok {
			kept = string(logging.KeptLastGood)
		}
		for _, p := range d.inForce[file] {
			st.ConfigErrors = append(st.ConfigErrors, statusapi.ConfigError{File: p.File, Line: p.Line, Column: p.Col, Message: p.Message, Link: name, Kept: kept})
		}
	}
	if !d.haveFacts {
		st.Problems = append(st.Problems, "waiting for the link facts: nothing is reconciled until the network can be read")
	}
	if d.factsErr != "" {
		st.Problems = append(st.Problems, "link facts: "+d.factsErr+" (the links stay as they were)")
	}
	if d.hookErr != "" {
		st.Problems = append(st.Problems, d.hookErr)
	}
	if e := d.linkErrs[""]; e != "" {
		st.Problems = append(st.Problems, e)
	}
	if r := d.lastApply; r != nil {
		a := &statusapi.Apply{At: r.at, Trigger: r.trigger, Result: logging.ApplyResult{Plan: r.plan, Err: r.err}.Result(),
			DurationSeconds: statusapi.Seconds(r.took), Warnings: r.warnings, LastChange: d.lastChange}
		a.Created, a.Updated, a.Removed = r.plan.Count()
		if r.err != nil {
			a.Error = r.err.Error()
		}
		st.LastApply = a
	}
	var pls []publishedLink
	for _, l := range d.desire.Selection.Active {
		// A link that could not be worked out (it needs a measurement, no
		// free slot) is matched but not among Desire.Active; it is shown
		// with its problem.
		a := ActiveLink{Policy: l}
		a.Facts, _ = d.facts.Interface(l.Match.Interface)
		a.ProfileKey = state.ProfileKey(l.Name, a.Facts.GatewayMAC.String())
		for _, x := range d.desire.Active {
			if x.Policy.Name == l.Name {
				a = x
			}
		}
		pls = append(pls, publishedLink{active: a, err: d.linkErrs[l.Name], runner: d.runners[l.Name], unshaped: maps.Clone(d.unshaped[l.Name])})
	}
	d.pub.Store(&published{status: st, links: pls})
}

// publishLive stores a copy of the live shaping for Status and metrics.
func (d *Daemon) publishLive() {
	s := cloneState(d.live)
	if !d.liveOK {
		s = shape.State{}
	}
	d.pubLive.Store(&s)
}

// Status returns what `macake status` shows: the owner's last published
// view plus every controller's state now. Safe to call from any goroutine.
func (d *Daemon) Status() statusapi.Status {
	p := d.pub.Load()
	st := p.status
	if !st.Daemon.StartedAt.IsZero() {
		st.Daemon.UptimeSeconds = statusapi.Seconds(time.Since(st.Daemon.StartedAt).Round(time.Second))
	}
	var live shape.State
	if l := d.pubLive.Load(); l != nil {
		live = *l
	}
	st.Links = make([]statusapi.Link, 0, len(p.links))
	for _, pl := range p.links {
		a := pl.active
		sl := statusapi.Link{
			Name: a.Policy.Name, Interface: a.Policy.Match.Interface, Mode: string(a.Policy.Shaper.Mode),
			ProfileKey: a.ProfileKey, Shapers: []statusapi.Shaper{}, Error: pl.err,
		}
		var ctl *controller.State
		if pl.runner != nil {
			s := pl.runner.loop.State()
			ctl = &s
			sl.Controller = ControllerStatus(s, pl.runner.note)
		}
		if l, ok := live.Link(a.Policy.Name); ok {
			sl.Shaped = len(pl.unshaped) < len(shape.Directions)
			for _, dir := range shape.Directions {
				sh := statusapi.Shaper{Direction: dir.String(), RateBits: l.Pipe(dir).RateBits, QueueBytes: l.Pipe(dir).QueueBytes,
					Source: string(a.Direction(dir).Source)}
				if ctl != nil && ctl.Direction(dir).LastApplied > 0 && ctl.Shaping {
					sh.Source = string(FromController)
				}
				if d.cfg.Backend.ShaperName != nil {
					sh.Name = d.cfg.Backend.ShaperName(l, dir)
				}
				// The believed rate is what macake asked for; it says
				// nothing when the shaper is not in place.
				sh.NotShaped = pl.unshaped[dir.String()]
				sl.Shapers = append(sl.Shapers, sh)
			}
		}
		st.Links = append(st.Links, sl)
	}
	return st
}

// ControllerStatus converts a controller's snapshot for status; note says
// what it lacks (a sensor), if anything.
func ControllerStatus(s controller.State, note string) *statusapi.Controller {
	c := &statusapi.Controller{
		Mode: s.Mode.String(), Status: s.Status.String(), Shaping: s.Shaping, Engaged: s.Engaged, Note: note,
		IdleRTTSeconds: statusapi.Seconds(s.IdleRTT), SinceResponseSeconds: statusapi.Seconds(s.SinceResponse),
		Download: directionStatus(s.Download), Upload: directionStatus(s.Upload),
		Reflectors: make([]statusapi.Reflector, 0, len(s.Reflectors)),
		Responses:  s.Counters.Responses, Cuts: s.Counters.Cuts, Increases: s.Counters.Increases,
	}
	for _, r := range s.Reflectors {
		c.Reflectors = append(c.Reflectors, statusapi.Reflector{
			Address: r.Addr.String(), BaselineDownSeconds: statusapi.Seconds(r.BaselineDown), BaselineUpSeconds: statusapi.Seconds(r.BaselineUp),
			DeltaDownSeconds: statusapi.Seconds(r.DeltaEWMADown), DeltaUpSeconds: statusapi.Seconds(r.DeltaEWMAUp),
			SinceResponseSeconds: statusapi.Seconds(r.SinceResponse), Responses: r.Responses, Offences: r.Offences,
		})
	}
	return c
}

func directionStatus(d controller.DirectionState) statusapi.Direction {
	return statusapi.Direction{
		RateBits: d.Rate, PipeRateBits: d.PipeRate, MinBits: d.Min, BaseBits: d.Base, MaxBits: d.Max,
		AchievedBits: d.Achieved, LoadPercent: d.LoadPercent, Load: d.Load.String(),
		BaselineSeconds: statusapi.Seconds(d.Baseline), DelayDeltaSeconds: statusapi.Seconds(d.DeltaEWMA),
		WindowAverageSeconds: statusapi.Seconds(d.WindowAverage), DelayThresholdSeconds: statusapi.Seconds(d.DelayThreshold),
		Delayed: d.Delayed, Bufferbloat: d.Bufferbloat,
	}
}

// ProfilesStatus lists a state file's profiles for status, by key.
func ProfilesStatus(st *state.State) []statusapi.Profile {
	out := []statusapi.Profile{}
	if st == nil {
		return out
	}
	for _, key := range sortedKeys(st.Profiles) {
		p := st.Profiles[key]
		out = append(out, statusapi.Profile{
			Key: key, Link: p.Link, DownloadCapacityBits: p.DownloadCapacity, UploadCapacityBits: p.UploadCapacity,
			IdleRTTSeconds: statusapi.Seconds(p.IdleRTT), GoodDownloadBits: p.GoodDownload, GoodUploadBits: p.GoodUpload,
			UpdatedAt: p.UpdatedAt,
		})
	}
	return out
}
