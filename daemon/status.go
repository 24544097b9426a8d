// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/diag"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// This file is the one status builder: the daemon's view (publish,
// Status) and the static picture `macake status` draws without a daemon
// (Static) are the same document built by newStatus, from the same kinds
// of parts.

// statusParts are what both pictures are built from.
type statusParts struct {
	daemon  statusapi.Daemon
	backend statusapi.Backend
	facts   linkfacts.Facts
	// policies are the policies in force and verdicts matching's verdict
	// on them (nil when matching did not run on these policies).
	policies []config.Link
	verdicts []desired.Verdict
	// problems are the policy file problems in force; kept says whether a
	// link's last good policy stands in for its broken file.
	problems []*config.Problem
	kept     func(link string) bool
	notes    []string
	drift    map[string]int
	state    *state.State
}

// newStatus builds the document from parts; its links are added by the
// caller.
func newStatus(p statusParts) statusapi.Status {
	st := statusapi.Status{
		FormatVersion: statusapi.FormatVersion,
		Daemon:        p.daemon, Backend: p.backend,
		Interfaces: reportInterfaces(p.facts.Interfaces), Policies: []statusapi.Policy{}, Links: []statusapi.Link{},
		ConfigErrors: []statusapi.ConfigError{}, Problems: diag.Messages(p.notes),
		DriftRepairs: maps.Clone(p.drift), Profiles: ProfilesStatus(p.state), Pauses: []statusapi.Pause{},
	}
	broken := map[string]bool{}
	for _, pr := range p.problems {
		ce := statusapi.ConfigError{Diagnostic: pr.Diagnostic()}
		if strings.HasSuffix(pr.File, ".toml") {
			broken[pr.File] = true
			ce.Link, ce.Kept = config.LinkName(pr.File), "nothing"
			if p.kept(ce.Link) {
				ce.Kept = "last_good"
			}
		}
		st.ConfigErrors = append(st.ConfigErrors, ce)
	}
	for i, l := range p.policies {
		row := statusapi.Policy{Name: l.Name, File: l.File, Interface: l.Match.Interface, Mode: string(l.Shaper.Mode), Priority: l.Match.Priority,
			LastGood: broken[l.File]}
		if len(p.verdicts) == len(p.policies) {
			row.Active, row.Reason = p.verdicts[i].Active, p.verdicts[i].Reason
		}
		st.Policies = append(st.Policies, row)
	}
	return st
}

// linkRow is the part of a link's row both pictures share.
func linkRow(a desired.ActiveLink, err string) statusapi.Link {
	sh := a.Policy.Shaper
	return statusapi.Link{Name: a.Policy.Name, Interface: a.Policy.Match.Interface, Mode: string(sh.Mode),
		DownloadMode: string(sh.DirectionMode(shape.Download)), UploadMode: string(sh.DirectionMode(shape.Upload)),
		ProfileKey: a.ProfileKey, Shapers: []statusapi.Shaper{}, Error: diag.Text(err)}
}

// published is the loop's view as of its last step, for Status, which
// runs on other goroutines. It is never modified once stored.
type published struct {
	status statusapi.Status
	links  []publishedLink
}

type publishedLink struct {
	active desired.ActiveLink
	err    string
	runner *linkRunner
	// profile is the state file's profile of the link's network, for the
	// advice on its bounds.
	profile state.Profile
	// unshaped maps a direction to why it is not shaped.
	unshaped map[string]string
}

// publish stores a copy of what status shows; it runs on the loop's
// goroutine after every step that changes it.
func (d *Daemon) publish() {
	rec := d.rec
	var notes []string
	if !d.net.have {
		notes = append(notes, "waiting for the link facts: nothing is reconciled until the network can be read")
	}
	if d.net.err != "" {
		notes = append(notes, "link facts: "+d.net.err+" (the links stay as they were)")
	}
	if rec.hookErr != "" {
		notes = append(notes, rec.hookErr)
	}
	if e := rec.linkErrs[""]; e != "" {
		notes = append(notes, e)
	}
	var problems []*config.Problem
	for _, file := range slices.Sorted(maps.Keys(d.policies.inForce)) {
		problems = append(problems, d.policies.inForce[file]...)
	}
	info := d.cfg.Backend.Info()
	st := newStatus(statusParts{
		daemon: statusapi.Daemon{
			Running: true, Socket: statusapi.SocketPath(d.cfg.StateDir), PID: os.Getpid(), Version: d.cfg.Version,
			StartedAt: d.started, ConfigDir: d.cfg.ConfigDir, StateDir: d.cfg.StateDir, LogFile: d.cfg.LogFile,
		},
		backend:  statusapi.Backend{Name: info.Name, System: info.System, Scope: info.Scope},
		facts:    d.net.facts,
		policies: d.policies.links(), verdicts: rec.desire.Selection.Verdicts,
		problems: problems,
		kept: func(link string) bool {
			_, ok := d.policies.lastGood[link]
			return ok
		},
		notes: notes, drift: rec.driftCounts, state: d.cfg.Tokens.State,
	})
	if st.DriftRepairs == nil {
		st.DriftRepairs = map[string]int{}
	}
	now := time.Now()
	st.Pauses = d.pausesStatus(now)
	if p, ok := d.pauses[state.AllLinks]; ok && p.InForce(now) {
		st.Daemon.PausedUntil = p.Until.UTC()
	}
	if r := rec.lastApply; r != nil {
		a := &statusapi.Apply{At: r.at, Trigger: r.trigger, Result: applyResult(r),
			DurationSeconds: statusapi.Seconds(r.took), Warnings: r.plan.Diagnostics(), LastChange: rec.lastChange}
		a.Created, a.Updated, a.Removed = r.plan.Count()
		a.Error = diag.OfPtr(r.err)
		st.LastApply = a
	}
	var pls []publishedLink
	for _, l := range rec.desire.Selection.Active {
		// A link that could not be worked out (it needs a measurement, no
		// free slot) is matched but not among Desire.Active; it is shown
		// with its problem.
		a := desired.ActiveLink{Policy: l}
		a.Facts, _ = d.net.facts.Interface(l.Match.Interface)
		a.ProfileKey = state.ProfileKey(l.Name, a.Facts.GatewayMAC.String())
		for _, x := range rec.desire.Active {
			if x.Policy.Name == l.Name {
				a = x
			}
		}
		pls = append(pls, publishedLink{active: a, err: rec.linkErrs[l.Name], runner: d.ctls.runners[l.Name], unshaped: maps.Clone(rec.unshaped[l.Name]),
			profile: d.cfg.Tokens.State.Profiles[a.ProfileKey]})
	}
	d.pub.Store(&published{status: st, links: pls})
}

// publishLive stores a copy of the live shaping for Status and metrics.
func (d *Daemon) publishLive() {
	s := cloneState(d.rec.live)
	if !d.rec.liveOK {
		s = shape.State{}
	}
	d.pubLive.Store(&s)
}

// Status returns what `macake status` shows: the loop's last published
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
	now := time.Now()
	st.Pauses = slices.Clone(st.Pauses)
	for i, pa := range st.Pauses {
		st.Pauses[i].RemainingSeconds = statusapi.Seconds(max(pa.Until.Sub(now), 0).Round(time.Second))
	}
	names, _ := d.cfg.Backend.(backend.ShaperReader)
	limits := d.cfg.Backend.Info().Limits
	st.Links = make([]statusapi.Link, 0, len(p.links))
	for _, pl := range p.links {
		a := pl.active
		sl := linkRow(a, pl.err)
		if a.Paused != "" {
			sl.PausedUntil = pausedUntil(st.Pauses, a.Policy.Name)
		}
		var ctl *controller.State
		if pl.runner != nil {
			s := pl.runner.state(time.Now())
			ctl = &s
			sl.Controller = ControllerStatus(s, pl.runner.note)
			withProbes(sl.Controller, pl.runner.probes)
			sl.Advice = d.bounds.Advice(now, a.Policy, pl.profile, limits)
		}
		if l, ok := live.Link(a.Policy.Name); ok {
			sl.Shaped = len(pl.unshaped) < len(shape.Directions)
			for _, dir := range shape.Directions {
				if !l.Pipe(dir).Shaped() {
					continue // its mode is off: there is no shaper
				}
				sh := statusapi.Shaper{Direction: dir.String(), RateBits: l.Pipe(dir).RateBits, QueueBytes: l.Pipe(dir).QueueBytes,
					Source: string(a.Direction(dir).Source)}
				if ctl != nil && ctl.Direction(dir).LastApplied > 0 && ctl.Shaping {
					sh.Source = string(desired.FromController)
				}
				if names != nil {
					sh.Name = names.ShaperName(l, dir)
				}
				// The believed rate is what macake asked for; it says
				// nothing when the shaper is not in place.
				sh.NotShaped = pl.unshaped[dir.String()]
				if sh.NotShaped == "" && sh.Name != "" {
					var why string
					if sh.Stats, why = d.cachedStats(sh.Name); why != "" {
						st.Backend.StatsError = diag.Text(why)
					}
				}
				sl.Shapers = append(sl.Shapers, sh)
			}
		}
		st.Links = append(st.Links, sl)
	}
	return st
}

// pausedUntil is when the pauses in pauses stop holding link: its own
// or every link's, whichever ends later.
func pausedUntil(pauses []statusapi.Pause, link string) time.Time {
	var until time.Time
	for _, p := range pauses {
		if (p.Link == link || p.Link == statusapi.AllLinks) && p.Until.After(until) {
			until = p.Until
		}
	}
	return until
}

// eventsShown is how many of the log's last lines a status request that
// asks for events gets.
const eventsShown = 50

// Query is Status with what q asks for: the shapers' counters read now
// (unless read in the last statsMaxAge), each link's recent history and
// the last log events. Safe to call from any goroutine.
func (d *Daemon) Query(ctx context.Context, q statusapi.Query) statusapi.Status {
	d.refreshStats(ctx, statsMaxAge)
	st := d.Status()
	if q.History {
		for i := range st.Links {
			st.Links[i].History = statusapi.NewHistory(historyStep, d.hist.get(st.Links[i].Name, q.Since))
		}
	}
	if q.Events && d.cfg.Events != nil {
		st.Events = []statusapi.Event{}
		for _, r := range d.cfg.Events.Last(eventsShown) {
			st.Events = append(st.Events, eventStatus(r))
		}
	}
	return st
}

// eventStatus converts a log line for status: its event word and link
// apart, the other attributes as the text log prints them.
func eventStatus(r logging.Record) statusapi.Event {
	e := statusapi.Event{Time: r.Time.UTC(), Level: strings.ToLower(r.Level.String()), Message: r.Message}
	for _, a := range r.Attrs {
		switch a.Key {
		case logging.KeyEvent:
			e.Event = a.Value
		case logging.KeyLink:
			e.Link = a.Value
		default:
			if e.Attrs == nil {
				e.Attrs = map[string]string{}
			}
			e.Attrs[a.Key] = a.Value
		}
	}
	e.Summary = statusapi.EventSummary(e)
	return e
}

// StaticInput is what the static picture is drawn from: one reading of
// the policy files (with the last good copies watch would keep in force),
// the link facts, the state file and, if readable, the live shapers.
type StaticInput struct {
	// Daemon says who did not answer and why.
	Daemon statusapi.Daemon
	// Policies and Problems are the policies in force and the files'
	// problems; Kept names the links whose last good copy stands in.
	Policies []config.Link
	Problems []*config.Problem
	Kept     map[string]bool
	// Facts are the link facts, FactsErr why they could not be read.
	Facts    linkfacts.Facts
	FactsErr error
	// State is the state file, StateErr why it could not be read.
	State    *state.State
	StateErr error
	// Backend is the opened backend, or BackendErr why it is not.
	Backend    backend.Backend
	BackendErr error
	// NotRoot: the caller is not root (reading the live state may need
	// it).
	NotRoot bool
	// MTU is each interface's MTU (desired.Inputs.MTU).
	MTU map[string]int
}

// Static is the picture without a daemon: the policies and which one
// matches the network now, the rates a start would use, the live shapers
// if they can be read, and the state file's profiles.
func Static(ctx context.Context, in StaticInput) statusapi.Status {
	var notes []string
	if in.StateErr != nil {
		notes = append(notes, "state file: "+in.StateErr.Error())
	}
	if in.FactsErr != nil {
		notes = append(notes, "link facts: "+in.FactsErr.Error())
	}
	var bs statusapi.Backend
	var be desired.BackendFacts
	if in.Backend != nil {
		info := in.Backend.Info()
		bs = statusapi.Backend{Name: info.Name, System: info.System, Scope: info.Scope}
		be = desired.BackendFactsOf(info)
	} else if in.BackendErr != nil {
		bs.LiveError = diag.OfPtr(in.BackendErr)
	}
	desire, derr := desired.Desired(in.Policies, in.Facts, desired.Inputs{State: in.State, MTU: in.MTU}, be)
	linkErrs := map[string]string{}
	for _, e := range reconcile.Unjoin(derr) {
		if le, ok := errors.AsType[*desired.LinkError](e); ok {
			linkErrs[le.Link] = le.Err.Error()
		} else {
			notes = append(notes, e.Error())
		}
	}
	st := newStatus(statusParts{
		daemon: in.Daemon, backend: bs, facts: in.Facts,
		policies: in.Policies, verdicts: desire.Selection.Verdicts,
		problems: in.Problems, kept: func(link string) bool { return in.Kept[link] },
		notes: notes, state: in.State,
	})
	if in.State != nil {
		// What a watch started now would keep paused.
		now := time.Now()
		for _, key := range slices.Sorted(maps.Keys(in.State.Pauses)) {
			if p := in.State.Pauses[key]; p.InForce(now) {
				st.Pauses = append(st.Pauses, *pauseStatus(key, p, now))
			}
		}
	}

	var live []backend.LiveShaper
	sr, _ := in.Backend.(backend.ShaperReader)
	if sr != nil {
		var err error
		if live, err = sr.LiveShapers(ctx); err != nil {
			st.Backend.LiveError = diag.OfPtr(err)
			if in.NotRoot {
				st.Backend.LiveError = diag.Text("reading the live pipes needs root (run with sudo): " + err.Error())
			}
			live = nil
		}
	}
	stats := map[string]*statusapi.ShaperStats{}
	if sr, ok := in.Backend.(backend.StatsReader); ok && len(live) > 0 {
		read, err := sr.ShaperStats(ctx)
		if err != nil {
			st.Backend.StatsError = diag.OfPtr(err)
		}
		at := time.Now()
		for _, s := range read {
			stats[s.Name] = statusFromStats(s, at)
		}
	}
	for _, a := range desire.Active {
		l := linkRow(a, linkErrs[a.Policy.Name])
		if sl, ok := desire.State.Link(a.Policy.Name); ok && st.Backend.LiveError != nil {
			// The live state is unknown: show what a start would install.
			for _, dir := range shape.Directions {
				if !sl.Pipe(dir).Shaped() {
					continue
				}
				sh := statusapi.Shaper{Direction: dir.String(), RateBits: sl.Pipe(dir).RateBits, QueueBytes: sl.Pipe(dir).QueueBytes,
					Source: string(a.Direction(dir).Source) + " (not read live)"}
				if sr != nil {
					sh.Name = sr.ShaperName(sl, dir)
				}
				l.Shapers = append(l.Shapers, sh)
			}
		}
		for _, ls := range live {
			if ls.Interface == a.Policy.Match.Interface {
				l.Shaped = true
				l.Shapers = append(l.Shapers, statusapi.Shaper{Direction: ls.Direction, Name: ls.Name, RateBits: ls.RateBits, QueueBytes: ls.QueueBytes,
					Source: "live", Stats: stats[ls.Name]})
			}
		}
		st.Links = append(st.Links, l)
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

// withProbes says in c how each reflector is probed.
func withProbes(c *statusapi.Controller, probes []shape.Reflector) {
	by := make(map[string]shape.Reflector, len(probes))
	for _, r := range probes {
		by[r.Addr.String()] = r
	}
	for i := range c.Reflectors {
		r, ok := by[c.Reflectors[i].Address]
		if !ok {
			r.Kind = shape.ProbeICMP
		}
		c.Reflectors[i].Probe, c.Reflectors[i].Port = r.Kind.String(), int(r.Port)
	}
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
	for _, key := range slices.Sorted(maps.Keys(st.Profiles)) {
		p := st.Profiles[key]
		out = append(out, statusapi.Profile{
			Key: key, Link: p.Link, DownloadCapacityBits: p.DownloadCapacity, UploadCapacityBits: p.UploadCapacity,
			IdleRTTSeconds: statusapi.Seconds(p.IdleRTT), GoodDownloadBits: p.GoodDownload, GoodUploadBits: p.GoodUpload,
			UpdatedAt: p.UpdatedAt,
		})
	}
	return out
}

// applyResult is a reconcile's outcome in the log's words.
func applyResult(r *applyRecord) string {
	return logging.ApplyResult{Plan: r.plan, Err: r.err}.Result()
}

// reportInterfaces are the sensed interfaces as the status document shows
// them ([] for none).
func reportInterfaces(facts []linkfacts.InterfaceFacts) []desired.InterfaceReport {
	out := make([]desired.InterfaceReport, 0, len(facts))
	for _, f := range facts {
		out = append(out, desired.ReportInterface(f))
	}
	return out
}
