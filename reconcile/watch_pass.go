// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/config"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// applyRecord is the outcome of the last reconcile, for status.
type applyRecord struct {
	at       time.Time
	trigger  string
	plan     plan.Plan
	applied  int
	took     time.Duration
	err      error
	warnings []string
	// quiet: a repeat of a failure already reported (the hook line is
	// still missing); counted, not logged again.
	quiet bool
}

// pass is one level-triggered reconcile: re-read the policy files, match
// them to the network, (re)start the controllers, work out the desired
// state (with the controllers' current rates), plan against the live
// system and apply. Whatever triggered it, it recomputes everything.
func (d *Daemon) pass(ctx context.Context, trigger string) {
	start := time.Now()
	d.loadConfig(ctx)
	if !d.haveFacts {
		d.publish()
		return
	}
	b := d.cfg.Backend
	links := d.links()
	d.mtu = d.cfg.MTU(interfacesOf(links))
	in := Inputs{
		State: d.cfg.Tokens.State, Rates: d.rates, Engaged: d.engaged, Reflectors: d.reflectors,
		MTU: d.mtu, MaxSlots: b.MaxSlots, KernelOverhead: b.KernelOverhead,
	}
	desire, derr := Desired(links, d.facts, in)
	var slotErr error
	if desire.AllocatesSlots(in.State) && b.LiveSlots != nil {
		// New slots: take the ones live on the same interfaces if free, so
		// a lost state file does not renumber working pipes, and never one
		// whose pipes are another tool's.
		var use SlotUse
		if use, slotErr = b.LiveSlots(ctx); slotErr == nil {
			in.LiveSlots, in.ForeignSlots = use.Interfaces, use.Foreign
			desire, derr = Desired(links, d.facts, in)
		}
	}
	d.noteLinkChanges(ctx, desire.Selection)
	d.linkErrs = map[string]string{}
	fresh, changed := d.syncRunners(desire)
	if changed {
		// The new controllers' reflectors are exempt from shaping, and a
		// link that went away left its rates behind.
		desire, derr = Desired(links, d.facts, in)
	}
	for _, e := range unjoinErrors(derr) {
		var le *LinkError
		if errors.As(e, &le) {
			d.linkErrs[le.Link] = joinNote(d.linkErrs[le.Link], le.Err.Error())
		} else {
			d.linkErrs[""] = joinNote(d.linkErrs[""], e.Error())
		}
	}
	desired := d.keepFailed(desire.State)
	d.desire = desire

	rec := &applyRecord{at: start, trigger: trigger}
	defer func() {
		rec.took = time.Since(start)
		d.finish(ctx, rec)
		for _, r := range fresh {
			if r.started || d.runners[r.name] != r {
				continue
			}
			l, _ := d.live.Link(r.name)
			r.start(d.runCtx, l)
		}
		d.publish()
	}()

	if slotErr != nil {
		// A slot recorded without knowing which are another tool's could
		// take over its pipes: the state file is what proves ownership.
		rec.err = fmt.Errorf("reading the live slots before giving a link a new one: %w", slotErr)
		d.liveOK = false
		return
	}
	if !maps.Equal(d.cfg.Tokens.State.Slots, desire.Slots) {
		// Slots first, atomically: a pipe must never exist under a number
		// the state file does not assign, or after a crash before the
		// anchor names it nothing would prove it is macake's.
		if err := d.cfg.Tokens.Update(func(st *state.State) { st.Slots = desire.Slots }); err != nil {
			rec.err = err
			return
		}
	}

	p, err := b.Plan(ctx, desired)
	p.Warnings = append(slices.Clone(desire.Warnings), p.Warnings...)
	rec.plan = p
	if was := d.hookErr; d.noteHook(ctx, err) {
		// Nothing is applied without the hook: pf would never evaluate
		// the rules, and macake never edits the main ruleset itself.
		d.liveOK = false
		rec.err = errors.New("not applied: pf's main ruleset lacks the dummynet-anchor line (see 'macake status')")
		rec.quiet = was != ""
		return
	}
	if err != nil {
		rec.err = fmt.Errorf("reading the live state: %w", err)
		d.liveOK = false
		return
	}
	d.noteUnshaped(ctx, p)
	if d.liveOK && reflect.DeepEqual(desired.Links, d.live.Links) && !p.Empty() {
		// Nothing macake decided changed, yet the live state differs:
		// someone else changed what macake owns.
		rec.trigger = "drift"
		for _, op := range p.Ops {
			kind := driftKind(op)
			d.ev.DriftRepaired(ctx, logging.Drift{Link: op.Link, Kind: kind, Detail: op.Label + ": " + op.Reason})
			d.driftCounts[string(kind)]++
			if d.cfg.Metrics != nil {
				d.cfg.Metrics.DriftRepaired(string(kind))
			}
		}
	}
	if p.Empty() {
		d.live, d.liveOK = cloneState(desired), true
		d.releaseSlots(rec, desire.Released)
		d.publishLive()
		return
	}
	applied, err := Apply(ctx, b, p, func(op plan.Op, err error) { d.ev.Change(ctx, op, err) })
	rec.applied = len(applied.Ops)
	if applied.Failed == nil && err == nil {
		d.live, d.liveOK = cloneState(desired), true
		d.lastChange = time.Now()
		d.releaseSlots(rec, desire.Released)
	} else {
		d.liveOK = false
		rec.err = err
		if len(applied.Ops) > 0 {
			d.lastChange = time.Now()
		}
	}
	d.publishLive()
}

// releaseSlots drops the slots of removed links once the live state
// matches, so their pipes are gone and the numbers can be reused.
func (d *Daemon) releaseSlots(rec *applyRecord, names []string) {
	if err := d.cfg.Tokens.ReleaseSlots(names); err != nil && rec.err == nil {
		rec.err = err
	}
}

// finish logs and counts a reconcile and schedules a retry after a failure.
func (d *Daemon) finish(ctx context.Context, rec *applyRecord) {
	for _, w := range rec.plan.Warnings {
		rec.warnings = append(rec.warnings, warningText(w))
	}
	d.lastApply = rec
	if !rec.quiet {
		d.ev.Apply(ctx, logging.ApplyResult{Trigger: rec.trigger, Plan: rec.plan, Applied: rec.applied, Duration: rec.took, Err: rec.err})
	}
	if d.cfg.Metrics != nil {
		d.cfg.Metrics.Reconciled(rec.applied, rec.took, rec.err)
	}
	if rec.err == nil || d.hookErr != "" {
		// A missing hook line needs a person; the drift interval looks
		// for it again.
		d.backoff = 0
		return
	}
	// Try again soon, backing off to the drift interval: a command that
	// failed once (pfctl busy, a transient error) often works a second
	// later, and a broken system must not be hammered.
	d.backoff = min(max(2*d.backoff, time.Second), d.cfg.DriftInterval)
	d.retry.Reset(d.backoff)
}

func warningText(w plan.Warning) string {
	if w.Link != "" {
		return w.Link + ": " + w.Message
	}
	return w.Message
}

// noteUnshaped records which directions the plan cannot shape, for
// status, and logs each finding once, when it first appears: nothing in a
// plan repairs it, so only a person can.
func (d *Daemon) noteUnshaped(ctx context.Context, p plan.Plan) {
	next := map[string]map[string]string{}
	for _, w := range p.Unshaped() {
		seen := false
		for _, dir := range w.Unshaped {
			if next[w.Link] == nil {
				next[w.Link] = map[string]string{}
			}
			if old := next[w.Link][dir]; old != "" {
				next[w.Link][dir] = old + "; " + w.Message
			} else {
				next[w.Link][dir] = w.Message
			}
			seen = seen || strings.Contains(d.unshaped[w.Link][dir], w.Message)
		}
		if !seen {
			d.ev.DriftUnrepaired(ctx, logging.Drift{Link: w.Link, Kind: logging.DriftNotShaped,
				Detail: strings.Join(w.Unshaped, " and ") + " not shaped: " + w.Message},
				"see the detail; `macake plan` shows the same warning")
		}
	}
	d.unshaped = next
}

// driftKind names what an op repairs, in the log's drift vocabulary.
func driftKind(op plan.Op) logging.DriftKind {
	switch {
	case op.Kind == pfdn.KindPFReference:
		return logging.DriftPFDisabled
	case op.Kind == pfdn.KindRules || strings.Contains(op.Kind, "filter"):
		if op.Action == plan.Create {
			return logging.DriftRulesMissing
		}
		return logging.DriftRulesChanged
	case op.Action == plan.Create:
		return logging.DriftShaperMissing
	}
	return logging.DriftShaperChanged
}

// noteHook records whether pf's main ruleset lost the hook line, logging
// the change (loudly when it goes, with the exact line to add); it
// returns true while the line is missing.
func (d *Daemon) noteHook(ctx context.Context, err error) bool {
	var he *pfdn.HookMissingError
	if errors.As(err, &he) {
		if d.hookErr == "" {
			d.ev.DriftUnrepaired(ctx, logging.Drift{Kind: logging.DriftHookMissing,
				Detail: fmt.Sprintf("pf's main ruleset lacks %s, so the anchor %q is never evaluated", he.Line, he.Anchor)},
				fmt.Sprintf("add the line %s to /etc/pf.conf after the rdr-anchor line and run: sudo pfctl -f /etc/pf.conf (macake never edits the main ruleset)", he.Line))
		}
		d.hookErr = strings.TrimSpace(he.Error())
		return true
	}
	if d.hookErr != "" && err == nil {
		d.ev.DriftRepaired(ctx, logging.Drift{Kind: logging.DriftHookMissing, Detail: "pf's main ruleset evaluates the anchor again (the dummynet-anchor line is back)"})
		d.hookErr = ""
	}
	return false
}

// keepFailed adds to desired the live shaping of links that are active
// but could not be worked out this time (e.g. an "auto" rate that needs a
// measurement): a problem never tears working shaping down.
func (d *Daemon) keepFailed(desired shape.State) shape.State {
	out := shape.State{Links: slices.Clone(desired.Links), Unshaped: desired.Unshaped}
	for name := range d.linkErrs {
		if _, ok := desired.Link(name); ok {
			continue
		}
		if l, ok := d.live.Link(name); ok && d.isActive(name) {
			out.Links = append(out.Links, l)
		}
	}
	out.Sort()
	return out
}

func (d *Daemon) isActive(name string) bool {
	for _, l := range d.desire.Selection.Active {
		if l.Name == name {
			return true
		}
	}
	return false
}

func cloneState(s shape.State) shape.State {
	out := shape.State{Links: make([]shape.Link, len(s.Links)), Unshaped: slices.Clone(s.Unshaped)}
	for i, l := range s.Links {
		l.Reflectors = slices.Clone(l.Reflectors)
		out.Links[i] = l
	}
	return out
}

func unjoinErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// noteLinkChanges logs every interface whose active link changed since the
// last reconcile, with what changed in its facts.
func (d *Daemon) noteLinkChanges(ctx context.Context, sel Selection) {
	now := map[string]string{}
	for _, l := range sel.Active {
		now[l.Match.Interface] = l.Name
	}
	first := !d.matchedOnce
	d.matchedOnce = true
	ifaces := slices.Sorted(maps.Keys(now))
	for i := range d.activeIfaces {
		if _, ok := now[i]; !ok {
			ifaces = append(ifaces, i)
		}
	}
	for _, i := range ifaces {
		from, to := d.activeIfaces[i], now[i]
		if from == to {
			continue
		}
		reason := "start"
		if !first {
			reason = d.factsChange(i)
		}
		d.ev.LinkChanged(ctx, logging.LinkChange{Interface: i, From: from, To: to, Reason: reason})
		if d.cfg.Metrics != nil {
			d.cfg.Metrics.LinkChanged()
		}
	}
	d.activeIfaces = now
	d.matchedFacts = d.facts
}

// factsChange describes how an interface's facts changed since the last
// reconcile, or says that the policies did.
func (d *Daemon) factsChange(iface string) string {
	before, had := d.matchedFacts.Interface(iface)
	after, has := d.facts.Interface(iface)
	var parts []string
	if had != has || before.Up != after.Up {
		parts = append(parts, fmt.Sprintf("%s %s -> %s", iface, upDown(had && before.Up), upDown(has && after.Up)))
	}
	if !before.GatewayMAC.Equal(after.GatewayMAC) {
		parts = append(parts, fmt.Sprintf("gateway %s -> %s", orNone(before.GatewayMAC.String()), orNone(after.GatewayMAC.String())))
	}
	if before.GatewayIP != after.GatewayIP {
		parts = append(parts, fmt.Sprintf("gateway ip %s -> %s", orNone(addrText(before.GatewayIP.IsValid(), before.GatewayIP.String())), orNone(addrText(after.GatewayIP.IsValid(), after.GatewayIP.String()))))
	}
	if before.SSID != after.SSID {
		parts = append(parts, fmt.Sprintf("ssid %s -> %s", orNone(before.SSID), orNone(after.SSID)))
	}
	if len(parts) == 0 {
		return "policy files changed"
	}
	return strings.Join(parts, ", ")
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func addrText(valid bool, s string) string {
	if !valid {
		return ""
	}
	return s
}

// loadConfig re-reads the policy directory. A file that stops parsing
// keeps its last good policy in force; a file that never parsed applies
// nothing; a deleted file removes its link; a directory that cannot be
// read keeps everything. Each error is logged once, when it appears, and
// its fix when it goes.
func (d *Daemon) loadConfig(ctx context.Context) {
	links, warnings, err := config.Load(d.cfg.ConfigDir, d.cfg.LoadOptions)
	problems := config.Problems(err)
	byFile := map[string][]*config.Problem{}
	dirTrouble := false
	for _, p := range problems {
		if p.File == "" || filepath.Clean(p.File) == filepath.Clean(d.cfg.ConfigDir) {
			dirTrouble = true
		}
		byFile[p.File] = append(byFile[p.File], p)
	}
	good := map[string]config.Link{}
	fromDir := map[string]bool{}
	if dirTrouble {
		maps.Copy(good, d.lastGood)
	} else {
		for _, l := range links {
			good[l.Name], fromDir[l.Name] = l, true
		}
		for _, file := range slices.Sorted(maps.Keys(byFile)) {
			name := linkNameOf(file)
			if old, ok := d.lastGood[name]; ok {
				good[name] = old
			} else if saved, ok := d.lastGoodCopies.load(name, file, d.cfg.LoadOptions); ok {
				// The first pass since a start: memory has nothing, the
				// copy saved when the file was last accepted stands in.
				good[name] = saved
				d.log.Warn("policy file has errors; the last good policy, saved when watch last accepted the file, stays in force", logging.KeyLink, name, "file", file, "copy", d.lastGoodCopies.path(name))
			}
		}
	}
	d.keepLastGood(good, fromDir, dirTrouble)
	// Log what appeared, changed or went away.
	for _, file := range slices.Sorted(maps.Keys(byFile)) {
		if reflect.DeepEqual(d.inForce[file], byFile[file]) {
			continue
		}
		name := linkNameOf(file)
		kept := logging.KeptNothing
		if _, ok := good[name]; ok {
			kept = logging.KeptLastGood
		}
		for _, p := range byFile[file] {
			d.ev.ConfigError(ctx, logging.ConfigProblem{File: p.File, Line: p.Line, Column: p.Col, Message: p.Message, Link: name, Kept: kept})
		}
	}
	for _, file := range slices.Sorted(maps.Keys(d.inForce)) {
		if _, still := byFile[file]; still {
			continue
		}
		if _, err := os.Stat(file); err == nil {
			d.ev.ConfigFixed(ctx, linkNameOf(file), file)
		} else {
			d.log.Info("a policy file with an error in force was removed", logging.KeyEvent, string(logging.EventConfigFixed), logging.KeyLink, linkNameOf(file), "file", file)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.lastGood)) {
		if _, ok := good[name]; !ok {
			d.log.Info("policy file removed; its link goes", logging.KeyLink, name, "file", d.lastGood[name].File)
		}
	}
	var ws []string
	for _, w := range warnings {
		ws = append(ws, w.String())
	}
	if text := strings.Join(ws, "\n"); text != d.warnings {
		d.warnings = text
		for _, w := range ws {
			d.log.Warn("policy file warning", "warning", w)
		}
	}
	d.lastGood, d.inForce = good, byFile
	if d.cfg.Metrics != nil {
		d.cfg.Metrics.SetConfigErrors(len(problems))
	}
}

// linkNameOf is a policy file's link name, its stem.
func linkNameOf(file string) string {
	return strings.TrimSuffix(filepath.Base(file), ".toml")
}

// links returns the policies in force, in name order.
func (d *Daemon) links() []config.Link {
	out := make([]config.Link, 0, len(d.lastGood))
	for _, name := range sortedKeys(d.lastGood) {
		out = append(out, d.lastGood[name])
	}
	return out
}

// interfacesOf lists the interfaces the policies name.
func interfacesOf(links []config.Link) []string {
	var names []string
	for _, l := range links {
		names = append(names, l.Match.Interface)
	}
	return names
}
