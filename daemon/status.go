// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/daemon/history"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/daemon/statusbuild"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/diag"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// This file is the daemon's view (publish, Status), built by the one
// status builder (statusbuild.New) from the same kinds of parts as the
// static picture `macake status` draws without a daemon
// (statusbuild.Static).

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
	st := statusbuild.New(statusbuild.Parts{
		Daemon: statusapi.Daemon{
			Running: true, Socket: statusapi.SocketPath(d.cfg.StateDir), PID: os.Getpid(), Version: d.cfg.Version,
			StartedAt: d.started, ConfigDir: d.cfg.ConfigDir, StateDir: d.cfg.StateDir, LogFile: d.cfg.LogFile,
		},
		Backend:  statusapi.Backend{Name: info.Name, System: info.System, Scope: info.Scope},
		Facts:    d.net.facts,
		Policies: d.policies.links(), Verdicts: rec.desire.Selection.Verdicts,
		Problems: problems,
		Kept: func(link string) bool {
			_, ok := d.policies.lastGood[link]
			return ok
		},
		Notes: notes, Drift: rec.driftCounts, State: d.cfg.Tokens.State,
	})
	if st.DriftRepairs == nil {
		st.DriftRepairs = map[string]int{}
	}
	now := time.Now()
	st.Pauses = d.pauses.Status(now)
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
		sl := statusbuild.LinkRow(a, pl.err)
		if a.Paused != "" {
			sl.PausedUntil = statusbuild.PausedUntil(st.Pauses, a.Policy.Name)
		}
		var ctl *controller.State
		if pl.runner != nil {
			s := pl.runner.state(time.Now())
			ctl = &s
			sl.Controller = statusbuild.Controller(s, pl.runner.note)
			statusbuild.WithProbes(sl.Controller, pl.runner.probes)
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
			st.Links[i].History = statusapi.NewHistory(history.Step, d.hist.Get(st.Links[i].Name, q.Since))
		}
	}
	if q.Events && d.cfg.Events != nil {
		st.Events = []statusapi.Event{}
		for _, r := range d.cfg.Events.Last(eventsShown) {
			st.Events = append(st.Events, statusbuild.Event(r))
		}
	}
	return st
}

// applyResult is a reconcile's outcome in the log's words.
func applyResult(r *applyRecord) string {
	return logging.ApplyResult{Plan: r.plan, Err: r.err}.Result()
}
