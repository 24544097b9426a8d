// SPDX-License-Identifier: Apache-2.0

package logging

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// Attribute keys that mean the same on every line. Other keys are specific
// to one event and documented on its method.
const (
	// KeyEvent holds the Event: what happened, one word.
	KeyEvent = "event"
	// KeyLink is the link (policy) name.
	KeyLink = "link"
	// KeyInterface is a network interface, e.g. "en0".
	KeyInterface = "interface"
	// KeyDirection is "upload" or "download".
	KeyDirection = "direction"
	// KeyReason says why, in the words of whoever decided.
	KeyReason = "reason"
	// KeyError is the error, with its position or the failing command.
	KeyError = "error"
	// KeyFromBits and KeyToBits are a rate change's rates, in bit/s.
	KeyFromBits = "from_bits_per_second"
	KeyToBits   = "to_bits_per_second"
)

// Event is the value of the "event" attribute: the vocabulary of the
// daemon's log. Filter on it (event=cut, "event":"cut"), never on messages.
type Event string

// The events. The level each is logged at is on its Events method.
const (
	EventApply           Event = "apply"              // a reconcile finished (one summary line)
	EventChange          Event = "change"             // one op of a reconcile was executed
	EventCut             Event = "cut"                // the controller cut a rate for bufferbloat
	EventLower           Event = "lower"              // the controller lowered a rate for another reason (decay toward base, the minimum on sleep or stall)
	EventRaise           Event = "raise"              // the controller raised a rate
	EventEngage          Event = "engage"             // balanced mode installed the shaper
	EventRelease         Event = "release"            // balanced mode removed the shaper
	EventStall           Event = "stall"              // no reflector answers and no traffic: rates frozen
	EventResume          Event = "resume"             // answers or traffic came back after a stall
	EventSleep           Event = "sleep"              // the link went idle: probes stopped
	EventWake            Event = "wake"               // traffic resumed: probes started
	EventSystemWake      Event = "system_wake"        // the machine slept; samples across the gap discarded
	EventReflector       Event = "reflector_replaced" // a reflector was swapped for a spare
	EventSilent          Event = "reflectors_silent"  // no reflector has answered for a while (said once)
	EventAnswering       Event = "reflectors_answer"  // a reflector answers again after a silence
	EventLinkChange      Event = "link_change"        // the policy matching an interface changed
	EventDriftRepaired   Event = "drift_repaired"     // something else changed what macake owns; put back
	EventDriftUnrepaired Event = "drift_unrepaired"   // drift macake must not or cannot repair
	EventConfigError     Event = "config_error"       // a policy file has an error; see "kept"
	EventConfigFixed     Event = "config_fixed"       // a file with an error in force parses again
	EventLogFile         Event = "log_file"           // the log file could not be rotated or reopened
)

// DriftKind says what drifted. The same words label the
// macake_drift_repairs_total metric.
type DriftKind string

// Drift kinds, backend-neutral: on macOS the rules are the pf anchor's
// and a shaper is a dummynet pipe; on Linux the rules are tc filters and a
// shaper is a qdisc or class.
const (
	DriftRulesMissing  DriftKind = "rules_missing"  // the anchor was flushed or the filters deleted
	DriftRulesChanged  DriftKind = "rules_changed"  // the rules are there but differ
	DriftShaperMissing DriftKind = "shaper_missing" // a pipe or qdisc was deleted
	DriftShaperChanged DriftKind = "shaper_changed" // a pipe or qdisc was reconfigured
	DriftPFDisabled    DriftKind = "pf_disabled"    // pf was disabled; a fresh enable reference taken
	DriftHookMissing   DriftKind = "hook_missing"   // pf.conf no longer evaluates the anchor (never repaired)
	DriftNotShaped     DriftKind = "not_shaped"     // a direction cannot be shaped: another tool's object is in the way, or the interface or kernel lacks something (never repaired)
)

// Kept says what stays in force for a link whose policy file has an error.
type Kept string

// What a config error leaves in force.
const (
	// KeptLastGood: the link keeps its last good policy until the file is
	// fixed (an edit broke a file that was loaded before).
	KeptLastGood Kept = "last_good"
	// KeptNothing: nothing is applied for the link (a new file with an
	// error, or one that has never parsed).
	KeptNothing Kept = "nothing"
)

// Events writes the daemon's event lines to Log, one line per event, each
// with an "event" attribute and, where it concerns a link, "link". The
// zero value is not usable: set Log.
type Events struct {
	Log *slog.Logger
}

// emit writes one event line if its level is enabled, so callers on the
// controller's path pay nothing for disabled lines beyond this check.
func (e Events) emit(ctx context.Context, level slog.Level, ev Event, msg string, attrs ...slog.Attr) {
	e.Log.LogAttrs(ctx, level, msg, append([]slog.Attr{slog.String(KeyEvent, string(ev))}, attrs...)...)
}

// seconds is a duration in seconds with microsecond resolution, so 42.3 ms
// prints as 0.0423, not 0.042300000000000004.
func seconds(d time.Duration) float64 {
	return float64(d/time.Microsecond) / 1e6
}

func secondsAttr(key string, d time.Duration) slog.Attr {
	return slog.Float64(key, seconds(d))
}

// ApplyResult is one finished reconcile.
type ApplyResult struct {
	// Trigger says what asked for it: "start", "config", "link_change",
	// "drift", "resync", "shutdown", ...
	Trigger string
	// Plan is what was planned.
	Plan plan.Plan
	// Applied counts the ops executed successfully (Plan.Ops[:Applied]).
	Applied int
	// Duration is how long planning and executing took.
	Duration time.Duration
	// Err is the failure that stopped it, if any.
	Err error
}

// Result is "no_changes", "applied" or "failed", the value of the apply
// line's "result" attribute (and of the macake_reconciles_total label).
func (r ApplyResult) Result() string {
	switch {
	case r.Err != nil:
		return "failed"
	case r.Plan.Empty():
		return "no_changes"
	}
	return "applied"
}

// Apply logs the summary line of a reconcile: event=apply, trigger,
// result, the plan's create/update/remove counts, how many ops were
// applied, duration_seconds, warnings (the plan's, as "link: message"
// strings) when there are any, and error when it failed. Level: error when
// it failed, info when it changed something, debug when there was nothing
// to do (the drift tick finds nothing every 30 s; that is not news). Log
// each executed op with Change before it.
func (e Events) Apply(ctx context.Context, r ApplyResult) {
	level := slog.LevelInfo
	msg := "reconciled"
	switch r.Result() {
	case "failed":
		level, msg = slog.LevelError, "reconcile failed"
	case "no_changes":
		level, msg = slog.LevelDebug, "reconciled: no changes"
	}
	if !e.Log.Enabled(ctx, level) {
		return
	}
	c, u, d := r.Plan.Count()
	attrs := []slog.Attr{
		slog.String("trigger", r.Trigger),
		slog.String("result", r.Result()),
		slog.Int("create", c), slog.Int("update", u), slog.Int("remove", d),
		slog.Int("applied", r.Applied),
		secondsAttr("duration_seconds", r.Duration),
	}
	if len(r.Plan.Warnings) > 0 {
		// Plan warnings are rare and each matters (a foreign pipe in our
		// range, a dummynet limitation): keep them on the summary line.
		ws := make(textList, len(r.Plan.Warnings))
		for i, w := range r.Plan.Warnings {
			ws[i] = warningText(w)
		}
		attrs = append(attrs, slog.Any("warnings", ws))
	}
	if r.Err != nil {
		attrs = append(attrs, slog.Any(KeyError, r.Err))
	}
	e.emit(ctx, level, EventApply, msg, attrs...)
}

// textList is a list attribute that stays readable in both formats: a
// JSON array, and in text one quoted value with the items joined by " | ".
type textList []string

// MarshalJSON keeps the list an array (encoding/json would otherwise use
// MarshalText and make it a string).
func (l textList) MarshalJSON() ([]byte, error) { return json.Marshal([]string(l)) }

// MarshalText joins the items for the text format.
func (l textList) MarshalText() ([]byte, error) { return []byte(strings.Join(l, " | ")), nil }

func warningText(w plan.Warning) string {
	if w.Link == "" {
		return w.Message
	}
	return w.Link + ": " + w.Message
}

// Change logs one executed op as event=change with the same object as a
// change in `macake apply --json`: link, kind, id, action, before and
// after (groups of base-unit values, e.g.
// before.bandwidth_bits_per_second), reason. The commands are left out;
// a failure's error carries the command and its stderr. Level: info, or
// error with the error when err is not nil.
func (e Events) Change(ctx context.Context, op plan.Op, err error) {
	level, msg := slog.LevelInfo, "change applied"
	if err != nil {
		level, msg = slog.LevelError, "change failed"
	}
	if !e.Log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	if op.Link != "" {
		attrs = append(attrs, slog.String(KeyLink, op.Link))
	}
	attrs = append(attrs,
		slog.String("kind", op.Kind),
		slog.String("id", op.ID),
		slog.String("action", string(op.Action)))
	before, after := changeValues(op)
	if len(before) > 0 {
		attrs = append(attrs, slog.Attr{Key: "before", Value: slog.GroupValue(before...)})
	}
	if len(after) > 0 {
		attrs = append(attrs, slog.Attr{Key: "after", Value: slog.GroupValue(after...)})
	}
	if op.Reason != "" {
		attrs = append(attrs, slog.String(KeyReason, op.Reason))
	}
	if err != nil {
		attrs = append(attrs, slog.Any(KeyError, err))
	}
	e.emit(ctx, level, EventChange, msg, attrs...)
}

// changeValues picks an op's before and after values by the rule of
// plan.Document: before only on update, after except on remove, fields
// without a JSON key or value skipped. Field order is kept, so lines are
// stable.
func changeValues(op plan.Op) (before, after []slog.Attr) {
	for _, f := range op.Fields {
		if f.Key == "" {
			continue
		}
		if op.Action == plan.Update && f.BeforeValue != nil {
			before = append(before, slog.Any(f.Key, f.BeforeValue))
		}
		if op.Action != plan.Remove && f.AfterValue != nil {
			after = append(after, slog.Any(f.Key, f.AfterValue))
		}
	}
	return before, after
}

// RateChange is one rate the controller set on a shaper.
type RateChange struct {
	Link      string
	Direction shape.Direction
	// FromBits and ToBits are the shaper rate before and after, in bit/s.
	FromBits, ToBits int64
	// Reason is the controller's, e.g. "cut" (bufferbloat), "increase",
	// "decay", "recover", "sleep-minimum".
	Reason string
	// Cut says the reason is a bufferbloat cut (controller.ReasonCut):
	// only such a lower rate is logged as event=cut.
	Cut bool
	// AchievedBits is the achieved rate at the time, in bit/s.
	AchievedBits int64
	// Baseline is the one-way idle delay; Delay the delay above it that
	// the decision saw (the bufferbloat window's mean).
	Baseline, Delay time.Duration
}

// Event says how the change is logged: event=cut at info for a lower rate
// whose reason is a bufferbloat cut; event=lower at debug for a lower rate
// for any other reason (decay toward base after a burst, the minimum on
// sleep or stall), which comes once a second per direction for a while
// after every burst and is no news; event=raise at debug otherwise,
// because under load raises come up to five times a second per direction
// (one per achieved-rate sample). So `grep event=cut` finds exactly the
// cuts that status and the metrics count.
func (c RateChange) Event() (Event, slog.Level, string) {
	switch {
	case c.ToBits < c.FromBits && c.Cut:
		return EventCut, slog.LevelInfo, "rate cut"
	case c.ToBits < c.FromBits:
		return EventLower, slog.LevelDebug, "rate lowered"
	}
	return EventRaise, slog.LevelDebug, "rate raised"
}

// RateChanged logs a rate the controller set, as its Event says, with
// link, direction, from_bits_per_second, to_bits_per_second, reason,
// achieved_bits_per_second, baseline_seconds and delay_delta_seconds. The
// rate's whole path is in the metrics, and every cut line shows the rate
// it was cut from.
func (e Events) RateChanged(ctx context.Context, c RateChange) {
	ev, level, msg := c.Event()
	if !e.Log.Enabled(ctx, level) {
		return
	}
	e.emit(ctx, level, ev, msg,
		slog.String(KeyLink, c.Link),
		slog.String(KeyDirection, c.Direction.String()),
		slog.Int64(KeyFromBits, c.FromBits),
		slog.Int64(KeyToBits, c.ToBits),
		slog.String(KeyReason, c.Reason),
		slog.Int64("achieved_bits_per_second", c.AchievedBits),
		secondsAttr("baseline_seconds", c.Baseline),
		secondsAttr("delay_delta_seconds", c.Delay))
}

// Engage logs balanced mode installing the shaper after a standing queue:
// event=engage, link, standing_seconds (how long the queue stood),
// delay_delta_seconds (its mean one-way delay above baseline). Info.
func (e Events) Engage(ctx context.Context, link string, standing, delay time.Duration) {
	e.emit(ctx, slog.LevelInfo, EventEngage, "shaper engaged",
		slog.String(KeyLink, link),
		secondsAttr("standing_seconds", standing),
		secondsAttr("delay_delta_seconds", delay))
}

// Release logs balanced mode removing the shaper after latency stayed
// clean: event=release, link, clean_seconds. Info.
func (e Events) Release(ctx context.Context, link string, clean time.Duration) {
	e.emit(ctx, slog.LevelInfo, EventRelease, "shaper released",
		slog.String(KeyLink, link),
		secondsAttr("clean_seconds", clean))
}

// Stall logs the controller freezing its rates because no reflector
// answers and no traffic flows: event=stall, link,
// since_response_seconds. Warn: probes may be blocked.
func (e Events) Stall(ctx context.Context, link string, sinceResponse time.Duration) {
	e.emit(ctx, slog.LevelWarn, EventStall, "controller stalled; rates frozen",
		slog.String(KeyLink, link),
		secondsAttr("since_response_seconds", sinceResponse))
}

// Resume logs the end of a stall: event=resume, link,
// download_bits_per_second and upload_bits_per_second (achieved). Info.
func (e Events) Resume(ctx context.Context, link string, downloadBits, uploadBits int64) {
	e.emit(ctx, slog.LevelInfo, EventResume, "controller resumed",
		slog.String(KeyLink, link),
		slog.Int64("download_bits_per_second", downloadBits),
		slog.Int64("upload_bits_per_second", uploadBits))
}

// Sleep logs the controller going to sleep on an idle link (probes stop
// until traffic resumes): event=sleep, link, idle_seconds. Info.
func (e Events) Sleep(ctx context.Context, link string, idle time.Duration) {
	e.emit(ctx, slog.LevelInfo, EventSleep, "controller sleeping; probes stopped",
		slog.String(KeyLink, link),
		secondsAttr("idle_seconds", idle))
}

// Wake logs traffic waking a sleeping controller: event=wake, link,
// download_bits_per_second and upload_bits_per_second (achieved). Info.
func (e Events) Wake(ctx context.Context, link string, downloadBits, uploadBits int64) {
	e.emit(ctx, slog.LevelInfo, EventWake, "controller woke; probes started",
		slog.String(KeyLink, link),
		slog.Int64("download_bits_per_second", downloadBits),
		slog.Int64("upload_bits_per_second", uploadBits))
}

// SystemWake logs the machine waking from sleep (seen as a clock jump):
// event=system_wake, slept_seconds. Baselines are re-learnt; samples
// across the gap are not trusted. Info.
func (e Events) SystemWake(ctx context.Context, slept time.Duration) {
	e.emit(ctx, slog.LevelInfo, EventSystemWake, "system woke from sleep; re-baselining",
		secondsAttr("slept_seconds", slept))
}

// ReflectorReplaced logs a reflector swapped for a spare: event=
// reflector_replaced, link, old, new, reason (e.g. "missed health
// checks"). Info.
func (e Events) ReflectorReplaced(ctx context.Context, link string, old, replacement netip.Addr, reason string) {
	e.emit(ctx, slog.LevelInfo, EventReflector, "reflector replaced",
		slog.String(KeyLink, link),
		slog.String("old", old.String()),
		slog.String("new", replacement.String()),
		slog.String(KeyReason, reason))
}

// ReflectorsSilent logs, once per silence, that no reflector of a link
// has answered for silent while probing: event=reflectors_silent, link,
// reflectors (how many the policy lists), silent_seconds, fix. Warn.
// Replacements are not logged one by one until ReflectorsAnswer.
func (e Events) ReflectorsSilent(ctx context.Context, link string, reflectors int, silent time.Duration, fix string) {
	e.emit(ctx, slog.LevelWarn, EventSilent, "no reflector answers; rates held, reflectors tried ever more slowly",
		slog.String(KeyLink, link),
		slog.Int("reflectors", reflectors),
		secondsAttr("silent_seconds", silent),
		slog.String("fix", fix))
}

// ReflectorsAnswer logs the end of a silence: event=reflectors_answer,
// link, replaced (the replacements meanwhile). Info.
func (e Events) ReflectorsAnswer(ctx context.Context, link string, replaced int) {
	e.emit(ctx, slog.LevelInfo, EventAnswering, "a reflector answers again",
		slog.String(KeyLink, link),
		slog.Int("replaced", replaced))
}

// LinkChange is a change of the policy matching one interface.
type LinkChange struct {
	Interface string
	// From and To are the link names before and after; "" is none (the
	// interface went down, or came up with no matching policy).
	From, To string
	// Reason says what changed, e.g. "gateway 74:24:9f:00:00:01 -> 02:00:00:00:00:02".
	Reason string
}

// LinkChanged logs a network change: event=link_change, interface, from,
// to, reason. Info. The reconcile it causes is logged by Apply with
// trigger=link_change.
func (e Events) LinkChanged(ctx context.Context, c LinkChange) {
	e.emit(ctx, slog.LevelInfo, EventLinkChange, "link changed",
		slog.String(KeyInterface, c.Interface),
		slog.String("from", c.From),
		slog.String("to", c.To),
		slog.String(KeyReason, c.Reason))
}

// Drift is something another tool or person changed in what macake owns.
type Drift struct {
	// Link is the link whose objects drifted; "" for shared ones (pf
	// itself, the hook line).
	Link string
	Kind DriftKind
	// Detail names the object, e.g. "pipe 48001" or "anchor com.apple/macake".
	Detail string
}

// DriftRepaired logs drift that was put back: event=drift_repaired, link
// (when set), kind, detail. Warn: something else is touching macake's
// objects, which is worth finding. The repair's changes follow as Change
// lines and an Apply line with trigger=drift.
func (e Events) DriftRepaired(ctx context.Context, d Drift) {
	e.emit(ctx, slog.LevelWarn, EventDriftRepaired, "drift repaired", driftAttrs(d)...)
}

// DriftUnrepaired logs drift macake must not repair, such as pf.conf
// losing its dummynet-anchor line (macake never edits the main ruleset):
// event=drift_unrepaired, link (when set), kind, detail, fix (what the
// user should do). Error: shaping is not in effect.
func (e Events) DriftUnrepaired(ctx context.Context, d Drift, fix string) {
	e.emit(ctx, slog.LevelError, EventDriftUnrepaired, "drift not repaired; shaping is not in effect",
		append(driftAttrs(d), slog.String("fix", fix))...)
}

func driftAttrs(d Drift) []slog.Attr {
	attrs := make([]slog.Attr, 0, 4)
	if d.Link != "" {
		attrs = append(attrs, slog.String(KeyLink, d.Link))
	}
	return append(attrs, slog.String("kind", string(d.Kind)), slog.String("detail", d.Detail))
}

// ConfigProblem is one error in a policy file that is in force: the
// daemon is running with it rather than stopping.
type ConfigProblem struct {
	// File is the policy file; Line and Column are 1-based (0 when the
	// problem is with the whole file, e.g. its permissions).
	File         string
	Line, Column int
	Message      string
	// Link is the link the file defines (its stem).
	Link string
	// Kept says what stays in force for the link meanwhile.
	Kept Kept
}

// ConfigError logs a policy file error in force: event=config_error,
// link, file, line, column, message, kept (last_good or nothing). Error:
// the user's edit is not in effect. Log it when the error appears, not on
// every reconcile; ConfigFixed closes it.
func (e Events) ConfigError(ctx context.Context, p ConfigProblem) {
	e.emit(ctx, slog.LevelError, EventConfigError, "config error in force",
		slog.String(KeyLink, p.Link),
		slog.String("file", p.File),
		slog.Int("line", p.Line),
		slog.Int("column", p.Column),
		slog.String("message", p.Message),
		slog.String("kept", string(p.Kept)))
}

// ConfigFixed logs a file whose error was in force parsing again:
// event=config_fixed, link, file. Info.
func (e Events) ConfigFixed(ctx context.Context, link, file string) {
	e.emit(ctx, slog.LevelInfo, EventConfigFixed, "config error fixed",
		slog.String(KeyLink, link),
		slog.String("file", file))
}
