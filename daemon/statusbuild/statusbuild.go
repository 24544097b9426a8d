// SPDX-License-Identifier: Apache-2.0

// Package statusbuild is the one status builder: the pieces the status
// document (statusapi.Status) is made of, converted from what the daemon
// and the state file hold, and the static picture `macake status` draws
// when no watch answers (Static). The daemon's live view (daemon.Status)
// is built from the same parts (New, LinkRow, Controller), so both
// pictures say the same things the same way.
package statusbuild

import (
	"context"
	"errors"
	"maps"
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

// Parts are what both pictures are built from.
type Parts struct {
	// Daemon and Backend are the document's daemon and backend sections.
	Daemon  statusapi.Daemon
	Backend statusapi.Backend
	// Facts are the link facts; their interfaces are listed.
	Facts linkfacts.Facts
	// Policies are the policies in force and Verdicts matching's verdict
	// on them (nil when matching did not run on these policies).
	Policies []config.Link
	Verdicts []desired.Verdict
	// Problems are the policy file problems in force; Kept says whether a
	// link's last good policy stands in for its broken file.
	Problems []*config.Problem
	Kept     func(link string) bool
	// Notes are the problems that are not a policy file's.
	Notes []string
	// Drift counts the drift repairs by kind.
	Drift map[string]int
	// State is the state file, whose profiles are listed (nil: none).
	State *state.State
}

// New builds the document from parts; its links are added by the
// caller.
func New(p Parts) statusapi.Status {
	st := statusapi.Status{
		FormatVersion: statusapi.FormatVersion,
		Daemon:        p.Daemon, Backend: p.Backend,
		Interfaces: reportInterfaces(p.Facts.Interfaces), Policies: []statusapi.Policy{}, Links: []statusapi.Link{},
		ConfigErrors: []statusapi.ConfigError{}, Problems: diag.Messages(p.Notes),
		DriftRepairs: maps.Clone(p.Drift), Profiles: Profiles(p.State), Pauses: []statusapi.Pause{},
	}
	broken := map[string]bool{}
	for _, pr := range p.Problems {
		ce := statusapi.ConfigError{Diagnostic: pr.Diagnostic()}
		if strings.HasSuffix(pr.File, ".toml") {
			broken[pr.File] = true
			ce.Link, ce.Kept = config.LinkName(pr.File), "nothing"
			if p.Kept(ce.Link) {
				ce.Kept = "last_good"
			}
		}
		st.ConfigErrors = append(st.ConfigErrors, ce)
	}
	for i, l := range p.Policies {
		row := statusapi.Policy{Name: l.Name, File: l.File, Interface: l.Match.Interface, Mode: string(l.Shaper.Mode), Priority: l.Match.Priority,
			LastGood: broken[l.File]}
		if len(p.Verdicts) == len(p.Policies) {
			row.Active, row.Reason = p.Verdicts[i].Active, p.Verdicts[i].Reason
		}
		st.Policies = append(st.Policies, row)
	}
	return st
}

// LinkRow is the part of a link's row both pictures share.
func LinkRow(a desired.ActiveLink, err string) statusapi.Link {
	sh := a.Policy.Shaper
	return statusapi.Link{Name: a.Policy.Name, Interface: a.Policy.Match.Interface, Mode: string(sh.Mode),
		DownloadMode: string(sh.DirectionMode(shape.Download)), UploadMode: string(sh.DirectionMode(shape.Upload)),
		ProfileKey: a.ProfileKey, Shapers: []statusapi.Shaper{}, Error: diag.Text(err)}
}

// PausedUntil is when the pauses in pauses stop holding link: its own
// or every link's, whichever ends later.
func PausedUntil(pauses []statusapi.Pause, link string) time.Time {
	var until time.Time
	for _, p := range pauses {
		if (p.Link == link || p.Link == statusapi.AllLinks) && p.Until.After(until) {
			until = p.Until
		}
	}
	return until
}

// Event converts a log line for status: its event word and link
// apart, the other attributes as the text log prints them.
func Event(r logging.Record) statusapi.Event {
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
	st := New(Parts{
		Daemon: in.Daemon, Backend: bs, Facts: in.Facts,
		Policies: in.Policies, Verdicts: desire.Selection.Verdicts,
		Problems: in.Problems, Kept: func(link string) bool { return in.Kept[link] },
		Notes: notes, State: in.State,
	})
	if in.State != nil {
		// What a watch started now would keep paused.
		now := time.Now()
		for _, key := range slices.Sorted(maps.Keys(in.State.Pauses)) {
			if p := in.State.Pauses[key]; p.InForce(now) {
				st.Pauses = append(st.Pauses, *Pause(key, p, now))
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
			stats[s.Name] = ShaperStats(s, at)
		}
	}
	for _, a := range desire.Active {
		l := LinkRow(a, linkErrs[a.Policy.Name])
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

// Controller converts a controller's snapshot for status; note says
// what it lacks (a sensor), if anything.
func Controller(s controller.State, note string) *statusapi.Controller {
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

// WithProbes says in c how each reflector is probed.
func WithProbes(c *statusapi.Controller, probes []shape.Reflector) {
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

// Profiles lists a state file's profiles for status, by key.
func Profiles(st *state.State) []statusapi.Profile {
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

// reportInterfaces are the sensed interfaces as the status document shows
// them ([] for none).
func reportInterfaces(facts []linkfacts.InterfaceFacts) []desired.InterfaceReport {
	out := make([]desired.InterfaceReport, 0, len(facts))
	for _, f := range facts {
		out = append(out, desired.ReportInterface(f))
	}
	return out
}

// Pause is one pause as status shows it.
func Pause(key string, p state.Pause, now time.Time) *statusapi.Pause {
	return &statusapi.Pause{Link: key, Since: p.Since.UTC(), Until: p.Until.UTC(), By: p.By,
		RemainingSeconds: statusapi.Seconds(max(p.Until.Sub(now), 0).Round(time.Second))}
}

// ShaperStats converts a backend's counters for status.
func ShaperStats(st backend.ShaperStats, at time.Time) *statusapi.ShaperStats {
	s := &statusapi.ShaperStats{Bytes: st.Bytes, Packets: st.Packets, Drops: st.Drops, BacklogBytes: st.BacklogBytes,
		BacklogPackets: st.BacklogPackets, Overlimits: st.Overlimits, ReadAt: at.UTC()}
	for _, t := range st.Tins {
		s.Tins = append(s.Tins, statusapi.TinStats{Name: t.Name, ThresholdBits: t.ThresholdBits, Bytes: t.Bytes,
			Packets: t.Packets, Drops: t.Drops, ECNMarks: t.ECNMarks, ACKDrops: t.ACKDrops, BacklogBytes: t.BacklogBytes,
			AverageDelaySeconds: statusapi.Seconds(t.AvgDelay), PeakDelaySeconds: statusapi.Seconds(t.PeakDelay),
			BaseDelaySeconds: statusapi.Seconds(t.BaseDelay), SparseFlows: t.SparseFlows, BulkFlows: t.BulkFlows,
			UnresponsiveFlows: t.UnresponsiveFlows})
	}
	return s
}
