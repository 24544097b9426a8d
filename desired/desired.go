// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/controller/autoqueue"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/diag"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// DefaultIdleRTT is the idle round-trip time that sizes a `queue = "auto"`
// pipe queue while the network has no measured idle baseline in the state
// file (`macake measure` and `watch` record one). 20 ms is the low end of
// what Starlink, cable and DSL show idle: it keeps the queue, and so the
// worst latency a full queue adds, small until the real baseline is known.
const DefaultIdleRTT = 20 * time.Millisecond

// Rates are a controller's current pipe rates for one link, in bit/s, as
// its decisions carry them (overhead compensation already applied). 0
// means "no decision yet" for that direction.
type Rates = shape.ByDirection[int64]

// Inputs are what Desired needs besides the policies and the link facts.
// The zero value is a one-shot `apply` on a machine with an empty state
// file.
type Inputs struct {
	// State is the state file: slots (stable pipe numbers) and measured
	// profiles. Desired never modifies it; the updated slot allocation is
	// returned in Desire.Slots. nil is an empty state.
	State *state.State
	// Rates are the controllers' current rates by link name (watch). A link
	// without an entry starts from its last known-good rate, else from its
	// policy's base rate.
	Rates map[string]Rates
	// Engaged tells, by link name, whether a balanced-mode controller has
	// engaged the shaper (watch). A balanced link that is not engaged
	// installs nothing.
	Engaged map[string]bool
	// Reflectors are the controllers' active probe targets by link name
	// (watch), whose probes are exempt from shaping, each as Probes says
	// it is probed. A link without an entry exempts the first
	// active_reflectors of its policy's list.
	Reflectors map[string][]netip.Addr
	// MTU is each interface's MTU in bytes; a missing one is
	// tuning.DefaultMTU.
	MTU map[string]int
	// Invocation is how the caller was run, for the commands its
	// messages name (the measurement an "auto" rate waits for).
	Invocation config.Invocation
	// Paused names the links whose shaping is paused (watch: `macake
	// pause`), each with why, e.g. "paused by alice until 15:04:05". A
	// paused link stays active, so no other policy takes its interface,
	// but installs nothing.
	Paused map[string]string
}

// BackendFacts are what Desired needs to know of the backend the state
// is for: what a pass learns from it (backend.Info, backend.SlotReader),
// apart from what its caller gives (Inputs).
type BackendFacts struct {
	// MaxSlots is how many links the backend can hold at once (pfdn: the
	// pipe range's Slots()); 0 means no limit.
	MaxSlots int
	// KernelOverhead says that the backend's shaper adds the policy's
	// per-packet overhead and mpu itself (backend.Info.KernelOverhead:
	// tc's htb and cake): policy rates are then passed on as wire rates,
	// unchanged, and shape.Link.Cake carries the overhead and mpu. When
	// false (dummynet), policy rates are lowered by PipeRate instead. Never
	// both: that would count the overhead twice.
	KernelOverhead bool
	// Limits are the backend's (backend.Info.Limits): measured capacities
	// above its highest rate are capped there, with a warning.
	Limits shape.Limits
	// LiveSlots maps an interface to the slot its shaping uses live
	// (backend.SlotReader). A link that has no slot in the state file
	// (first run, or the file was lost or corrupt) takes the slot live on
	// its interface when that one is free, so losing the state file does
	// not renumber pipes that work.
	LiveSlots map[string]int
	// ForeignSlots are slots whose backend objects exist live but are not
	// provably macake's (backend.SlotReader: a pipe in macake's range
	// that neither the state file nor macake's anchor accounts for). A new
	// link never takes one: that would overwrite another tool's pipe and,
	// once the slot is in the state file, make it look like macake's.
	ForeignSlots map[int]bool
}

// BackendFactsOf are the facts a backend's Info gives; the live slots
// come from its SlotReader.
func BackendFactsOf(info backend.Info) BackendFacts {
	return BackendFacts{MaxSlots: info.MaxSlots, KernelOverhead: info.KernelOverhead, Limits: info.Limits}
}

// RateSource says where a desired rate came from.
type RateSource string

// The rate sources, in order of preference.
const (
	// FromController is the running controller's current rate.
	FromController RateSource = "controller"
	// FromKnownGood is the last rate the state file records as free of
	// bufferbloat on this network.
	FromKnownGood RateSource = "known-good"
	// FromPolicy is the policy's base rate (shaper.download/upload).
	FromPolicy RateSource = "policy"
)

// DirectionRate is the desired shaper of one direction of an active link
// and how it was worked out.
type DirectionRate struct {
	// Pipe is what the backend is asked to install.
	Pipe shape.Pipe
	// Source tells where Pipe.RateBits came from.
	Source RateSource
	// Min, Base and Max are the controller's bounds for this direction in
	// bit/s (controller rates, before overhead compensation), from
	// config.Link.Rates with the measured capacity.
	Min, Base, Max int64
	// Queue sizes the pipe's queue at any rate: watch's hot path gives
	// each controller decision its queue with it, without working the
	// policy out again.
	Queue QueueSizer
}

// QueueSizer sizes one direction's pipe queue at a rate: the policy's
// fixed size, or for queue = "auto" autoqueue.Bytes at the
// network's idle RTT and the interface's MTU, with a reserve for sparse
// packets (autoqueue.SparseReserve) where the backend's queue takes a
// packet that fits (shape.Limits.FitsQueue: Linux's bfifo).
type QueueSizer struct {
	// Auto is queue = "auto"; Fixed is the size in bytes otherwise.
	Auto  bool
	Fixed int64
	// IdleRTT and MTU are what an auto queue is sized from.
	IdleRTT time.Duration
	MTU     int
	// Reserve adds the sparse reserve to an auto queue.
	Reserve bool
}

// Pipe returns the pipe at rateBits with its queue.
func (q QueueSizer) Pipe(rateBits int64) shape.Pipe {
	if !q.Auto {
		return shape.Pipe{RateBits: rateBits, QueueBytes: q.Fixed}
	}
	b := autoqueue.Bytes(rateBits, q.IdleRTT, q.MTU)
	if q.Reserve {
		b = autoqueue.SparseReserve(b, q.MTU)
	}
	return shape.Pipe{RateBits: rateBits, QueueBytes: b}
}

// ActiveLink is one policy chosen for its interface by Match.
type ActiveLink struct {
	// Policy is the matched policy.
	Policy config.Link
	// Facts are its interface's facts.
	Facts linkfacts.InterfaceFacts
	// ProfileKey is the state-file profile of this network
	// (state.ProfileKey of the link and the gateway's MAC).
	ProfileKey string
	// Shaped is false when the link installs nothing: mode "off",
	// "balanced" while not engaged, or paused.
	Shaped bool
	// Paused says why the link's shaping is paused (Inputs.Paused); ""
	// when it is not.
	Paused string
	// Upload and Download are the desired shapers (zero when not Shaped).
	Upload, Download DirectionRate
}

// Direction returns the desired shaper of direction d.
func (a ActiveLink) Direction(d shape.Direction) DirectionRate {
	return shape.ByDirection[DirectionRate]{Upload: a.Upload, Download: a.Download}.Of(d)
}

// Desire is the outcome of Desired.
type Desire struct {
	// State is the backend-neutral desired state: one shape.Link per
	// shaped active link, sorted by name.
	State shape.State
	// Selection is Match's verdict on every policy.
	Selection Selection
	// Active lists every active link (shaped or not), sorted by name.
	Active []ActiveLink
	// Slots is the slot allocation to save in the state file before
	// applying: the slots of links still in the config, new ones for links
	// shaped for the first time, and still the slots of links gone from the
	// config (Released), because their pipes may be live until the apply
	// removes them and the state file is what proves those pipes are
	// macake's.
	Slots map[string]int
	// Released names the links gone from the config that still hold a slot.
	// Their slots are dropped from the state file (state.File.ReleaseSlots)
	// only after an apply has left the live state matching, and no new link
	// takes one before that.
	Released []string
	// Warnings are notes worth showing with the plan.
	Warnings []plan.Warning
}

// AllocatesSlots reports whether d gives a slot to a link that has none
// in st: then Inputs.LiveSlots is worth reading (it costs the backend's
// reads) and Desired worth running again with it.
func (d Desire) AllocatesSlots(st *state.State) bool {
	for name := range d.Slots {
		if st == nil {
			return true
		}
		if _, ok := st.Slots[name]; !ok {
			return true
		}
	}
	return false
}

// LinkError is a problem that keeps one active link from being shaped.
type LinkError struct {
	Link string
	File string
	Err  error
}

// Error returns "FILE: link "NAME": problem".
func (e *LinkError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("link %q: %v", e.Link, e.Err)
	}
	return fmt.Sprintf("%s: link %q: %v", e.File, e.Link, e.Err)
}

// Unwrap returns the underlying problem.
func (e *LinkError) Unwrap() error { return e.Err }

// Diagnostic is the problem in the one error schema: its file and link
// beside the message.
func (e *LinkError) Diagnostic() diag.Diagnostic {
	return diag.Diagnostic{Message: e.Err.Error(), File: e.File, Link: e.Link}
}

// Desired works out what should be shaped right now. It is pure: it reads
// only its arguments and changes none of them.
//
// Matching is Match's. For each active link and direction the rate
// is the controller's current rate when in.Rates has one (so a drift check
// never fights the controller), else the profile's last known-good rate
// (autorate and balanced only; clamped to the policy's bounds), else the
// policy's base rate ("auto" is 95 % of the measured capacity). Policy rates
// are controller rates, counted on the wire: with overhead or mpu set they
// are converted to the pipe rate the controller would send (PipeRate),
// unless be.KernelOverhead says the backend's shaper counts the overhead
// itself (then shape.Link.Cake carries overhead and mpu to it). The queue is the policy's
// fixed size, or for "auto" autoqueue.Bytes at the pipe rate, the
// profile's idle RTT (DefaultIdleRTT when unmeasured) and the interface MTU.
// Mode "off" installs nothing; "balanced" installs nothing unless
// in.Engaged says so; a link in in.Paused installs nothing.
//
// A link that cannot be shaped (an "auto" rate without a measurement, no
// free slot) is left out of the result, and the returned error, a join of
// *LinkError, names it; every other link is still in the Desire. One-shot
// callers refuse to apply on any error; watch keeps the failed link's
// previous desired state so that a problem never tears working shaping
// down.
func Desired(links []config.Link, facts linkfacts.Facts, in Inputs, be BackendFacts) (Desire, error) {
	st := in.State
	if st == nil {
		st = &state.State{}
	}
	inConfig := make(map[string]bool, len(links))
	for _, l := range links {
		inConfig[l.Name] = true
	}
	slots := state.State{Slots: maps.Clone(st.Slots)}
	var released []string
	for _, name := range slots.LinkNames() {
		if !inConfig[name] {
			released = append(released, name)
		}
	}
	maxSlots := be.MaxSlots
	if maxSlots <= 0 {
		maxSlots = 1 << 20
	}

	sel := Match(links, facts)
	adoptLiveSlots(&slots, sel.Active, in, be, maxSlots)
	d := Desire{Selection: sel, State: shape.State{Links: []shape.Link{}}}
	var errs []error
	broken := map[string]bool{}
	for _, l := range sel.Active {
		f, _ := facts.Interface(l.Match.Interface)
		a := ActiveLink{Policy: l, Facts: f, ProfileKey: state.ProfileKey(l.Name, f.GatewayMAC.String()), Paused: in.Paused[l.Name]}
		if a.Paused != "" {
			d.Active = append(d.Active, a)
			continue
		}
		switch l.Shaper.Effective() {
		case config.ModeOff:
			d.Active = append(d.Active, a)
			continue
		case config.ModeBalanced:
			if !in.Engaged[l.Name] {
				d.Warnings = append(d.Warnings, plan.Warning{Link: l.Name, Message: fmt.Sprintf(
					"mode \"balanced\": nothing is installed on %s until `macake watch` sees a standing queue and engages the shaper", l.Match.Interface)})
				d.Active = append(d.Active, a)
				continue
			}
		}
		profile := st.Profiles[a.ProfileKey]
		mtu := in.MTU[l.Match.Interface]
		if mtu <= 0 {
			mtu = tuning.DefaultMTU
		}
		var failed bool
		var unmeasured []shape.Direction
		for _, dir := range shape.Directions {
			r, err := directionRate(l, dir, profile, in.Rates[l.Name].Of(dir), mtu, be)
			if errors.Is(err, config.ErrNeedsMeasurement) {
				unmeasured = append(unmeasured, dir)
				continue
			}
			if err != nil {
				errs = append(errs, &LinkError{Link: l.Name, File: l.File, Err: err})
				failed = true
				broken[l.Name] = true
				break
			}
			rates := shape.ByDirection[DirectionRate]{Upload: a.Upload, Download: a.Download}.With(dir, r)
			a.Upload, a.Download = rates.Upload, rates.Download
			if msg := aboveLimit(l, dir, profile, be.Limits); msg != "" && l.Shaper.Shapes(dir) {
				d.Warnings = append(d.Warnings, plan.Warning{Link: l.Name, Message: msg})
			}
		}
		if !failed && len(unmeasured) > 0 {
			errs = append(errs, &LinkError{Link: l.Name, File: l.File, Err: &UnmeasuredError{
				Directions: unmeasured, Measure: in.Invocation.Command(true, "measure", "--link", l.Name)}})
			failed = true
			broken[l.Name] = true
		}
		if failed {
			continue
		}
		slot, ok := slots.Slot(l.Name, maxSlots, be.ForeignSlots)
		if !ok {
			msg := fmt.Sprintf("no free slot: the backend holds at most %d links at once", maxSlots)
			if len(be.ForeignSlots) > 0 {
				msg += fmt.Sprintf(", and %d of its slots hold pipes macake did not make (see the plan's warnings)", len(be.ForeignSlots))
			}
			if len(released) > 0 {
				msg += "; the slots of removed links are free again after the next successful apply"
			}
			errs = append(errs, &LinkError{Link: l.Name, File: l.File, Err: fmt.Errorf(
				"%s; remove policies or widen the pipe range", msg)})
			broken[l.Name] = true
			continue
		}
		a.Shaped = true
		d.Active = append(d.Active, a)
		d.State.Links = append(d.State.Links, shape.Link{
			Name: l.Name, Interface: l.Match.Interface, Slot: slot,
			Upload: a.Upload.Pipe, Download: a.Download.Pipe,
			Reflectors: reflectors(l, profile, in.Reflectors),
			Cake:       l.ShapeCake(),
		})
	}
	d.State.Sort()
	d.State.Unshaped = unshapedLinks(links, sel, st.Slots, d.State, broken, in.Paused)
	d.Slots = slots.Slots
	if d.Slots == nil {
		d.Slots = map[string]int{}
	}
	d.Released = released
	return d, errors.Join(errs...)
}

// unshapedLinks lists every link that held a slot in the state file but
// installs nothing now, with the reason a plan shows for removing what it
// left live. Links that failed (broken) are left out: watch keeps their
// previous shaping, and one-shot apply refuses to run.
func unshapedLinks(links []config.Link, sel Selection, held map[string]int, s shape.State, broken map[string]bool, paused map[string]string) []shape.Unshaped {
	var out []shape.Unshaped
	for _, name := range slices.Sorted(maps.Keys(held)) {
		if _, shaped := s.Link(name); shaped || broken[name] {
			continue
		}
		u := shape.Unshaped{Name: name, Slot: held[name], Reason: "policy file removed"}
		for i, l := range links {
			if l.Name == name {
				u.Interface = l.Match.Interface
				u.Reason = unshapedReason(l, sel.Verdicts[i])
				if why := paused[name]; why != "" && sel.Verdicts[i].Active {
					u.Reason = why
				}
				break
			}
		}
		out = append(out, u)
	}
	return out
}

// unshapedReason says why a link still in the config installs nothing.
func unshapedReason(l config.Link, v Verdict) string {
	iface := l.Match.Interface
	switch {
	case v.Active && l.Shaper.Mode == config.ModeOff:
		return `mode = "off"`
	case v.Active && l.Shaper.Effective() == config.ModeOff:
		return `download_mode and upload_mode are "off"`
	case v.Active && l.Shaper.Mode == config.ModeBalanced:
		return `mode = "balanced", and the shaper is not engaged`
	case v.Active:
		return "active, but not shaped"
	case v.Matches:
		// "matches, but outranked by X (priority 10 > 0)"
		return strings.TrimPrefix(v.Reason, "matches, but ")
	case v.Reason == "interface "+iface+" is down" || v.Reason == "interface "+iface+" not present":
		return v.Reason
	}
	return "no longer matches the network (" + v.Reason + ")"
}

// adoptLiveSlots gives each shaped active link without a slot the slot
// that is live on its interface, when no other link holds it. It runs
// before any new slot is allocated, so a lowest-free allocation never
// takes a slot another link is about to adopt.
func adoptLiveSlots(slots *state.State, active []config.Link, in Inputs, be BackendFacts, maxSlots int) {
	if len(be.LiveSlots) == 0 {
		return
	}
	used := map[int]bool{}
	for _, n := range slots.Slots {
		used[n] = true
	}
	for _, l := range active {
		if _, has := slots.Slots[l.Name]; has || !shaped(l, in) {
			continue
		}
		n, ok := be.LiveSlots[l.Match.Interface]
		if !ok || n < 0 || n >= maxSlots || used[n] {
			continue
		}
		if slots.Slots == nil {
			slots.Slots = map[string]int{}
		}
		slots.Slots[l.Name] = n
		used[n] = true
	}
}

// shaped reports whether an active link installs anything.
func shaped(l config.Link, in Inputs) bool {
	if in.Paused[l.Name] != "" {
		return false
	}
	switch l.Shaper.Effective() {
	case config.ModeOff:
		return false
	case config.ModeBalanced:
		return in.Engaged[l.Name]
	}
	return true
}

// Bounds are one direction's rates as the policy and the network decide
// them, in bit/s on the wire (controller rates, before overhead
// compensation).
type Bounds struct {
	// Min, Base and Max are the controller's bounds (config.Link.Rates
	// with the measured capacity, capped at the backend's highest rate).
	Min, Base, Max int64
	// Start is where shaping starts without a controller's rate: the last
	// known-good rate on this network clamped into [Min, Max] (autorate
	// and balanced), else Base; Source says which.
	Start  int64
	Source RateSource
}

// LinkBounds decides direction d's rates of link l on the network whose
// profile is p, for a backend whose highest rate is lim: the one home of
// the bounds, the known-good start and its clamping, which both the
// desired state and the controller take. A direction that is not shaped
// (mode or direction mode "off") is observed at its configured rate, or at
// the default rate when that is an unmeasured "auto" (the rate only
// scales the load classes). An unmeasured "auto" rate otherwise fails
// with config.ErrNeedsMeasurement.
func LinkBounds(l config.Link, d shape.Direction, p state.Profile, lim shape.Limits) (Bounds, error) {
	capacity, peak, good := p.Capacity(d)
	lo, base, hi, err := l.Rates(d, units.Rate(capacity), units.Rate(peak), units.Rate(lim.Rate()))
	if errors.Is(err, config.ErrNeedsMeasurement) && !l.Shaper.Shapes(d) {
		lo, base, hi, err = config.Link{Policy: config.Defaults}.Rates(d, 0, 0, 0)
	}
	if err != nil {
		return Bounds{}, err
	}
	b := Bounds{Min: int64(lo), Base: int64(base), Max: int64(hi), Start: int64(base), Source: FromPolicy}
	if l.Shaper.Steers(d) && good > 0 {
		b.Start, b.Source = max(b.Min, min(b.Max, good)), FromKnownGood
	}
	return b, nil
}

// directionRate resolves one direction's desired pipe.
func directionRate(l config.Link, dir shape.Direction, p state.Profile, current int64, mtu int, be BackendFacts) (DirectionRate, error) {
	b, err := LinkBounds(l, dir, p, be.Limits)
	if errors.Is(err, config.ErrNeedsMeasurement) {
		return DirectionRate{}, err
	}
	if err != nil {
		return DirectionRate{}, fmt.Errorf("shaper.%s: %w", dir, err)
	}
	r := DirectionRate{Min: b.Min, Base: b.Base, Max: b.Max, Source: b.Source, Queue: queueSizer(l, p, mtu, be.Limits)}
	if !l.Shaper.Shapes(dir) {
		// Observed, not shaped: the zero Pipe installs nothing.
		r.Source = ""
		return r, nil
	}
	if current > 0 && l.Shaper.Steers(dir) {
		// A controller's rate is a pipe rate already; a direction no
		// controller steers keeps its policy's.
		r.Source = FromController
		r.Pipe = r.Queue.Pipe(current)
		return r, nil
	}
	rate, comp := shaperCompensation(l, b.Start, mtu, be.KernelOverhead)
	r.Pipe = r.Queue.Pipe(rate)
	r.Pipe.Compensation = comp
	return r, nil
}

// queueSizer is the queue rule of link l on the network whose profile is p
// (its idle RTT; DefaultIdleRTT when unmeasured), on an interface of the
// given MTU, for a backend whose shaper has the limits lim.
func queueSizer(l config.Link, p state.Profile, mtu int, lim shape.Limits) QueueSizer {
	if !l.Shaper.Queue.Auto {
		return QueueSizer{Fixed: int64(l.Shaper.Queue.Size)}
	}
	idle := p.IdleRTT
	if idle <= 0 {
		idle = DefaultIdleRTT
	}
	return QueueSizer{Auto: true, IdleRTT: idle, MTU: mtu, Reserve: lim.FitsQueue}
}

// ShaperRate is the rate the backend's shaper gets for controller rate
// rate: unchanged when the shaper counts the policy's overhead itself
// (kernelOverhead), else lowered by PipeRate.
func ShaperRate(l config.Link, rate int64, mtu int, kernelOverhead bool) int64 {
	pipe, _ := shaperCompensation(l, rate, mtu, kernelOverhead)
	return pipe
}

// shaperCompensation is ShaperRate and how it was worked out, for the plan.
func shaperCompensation(l config.Link, rate int64, mtu int, kernelOverhead bool) (int64, shape.Compensation) {
	if kernelOverhead {
		return rate, shape.Compensation{}
	}
	if mtu <= 0 {
		mtu = tuning.DefaultMTU
	}
	return framing(l).Compensate(rate, int64(mtu))
}

// framing is the policy's per-packet framing, as the overhead
// compensation takes it.
func framing(l config.Link) shape.Framing {
	return shape.Framing{Overhead: int64(l.Shaper.Overhead.Bytes), MPU: int64(l.Shaper.MPU)}
}

// PipeRate converts a controller rate (bit/s on the wire) to the rate a
// pipe must get when each packet carries overhead bytes of framing and
// takes at least mpu bytes on the wire: the pipe counts packet bytes only,
// so it runs at rate × mtu / max(mtu + overhead, mpu). The formula is
// shape.Framing's, the controller's too: this is its conversion before it
// has seen any packets (it assumes MTU-sized packets), to the same whole
// kbit/s, so a one-shot apply and a freshly started controller agree.
// Without overhead and mpu it returns rate unchanged.
func PipeRate(rateBits int64, overhead, mpu, mtu int) int64 {
	if mtu <= 0 {
		mtu = tuning.DefaultMTU
	}
	return shape.Framing{Overhead: int64(overhead), MPU: int64(mpu)}.PipeRate(rateBits, int64(mtu))
}

// reflectors returns the link's probe targets to exempt, each as it is
// probed on the network of profile (Probes): the controller's active set
// when watch gave one, else the first active_reflectors of the policy's
// list (the set a controller starts with before any shuffle).
func reflectors(l config.Link, profile state.Profile, active map[string][]netip.Addr) []shape.Reflector {
	all := Probes(l, profile)
	if r, ok := active[l.Name]; ok {
		return probesOf(all, r)
	}
	if n := l.Autorate.ActiveReflectors; n > 0 && n < len(all) {
		all = all[:n]
	}
	return all
}

// UnmeasuredError is a link whose "auto" rates wait for a measurement of
// the network it is on: no error of the policy, nor of the system, but a
// step not taken yet. It matches config.ErrNeedsMeasurement with
// errors.Is.
type UnmeasuredError struct {
	// Directions are the directions whose rate is "auto".
	Directions []shape.Direction
	// Measure is the command that measures the link, with the caller's
	// directories (Inputs.Invocation).
	Measure string
}

// Error names every direction that waits, and the command to run.
func (e *UnmeasuredError) Error() string {
	var keys []string
	for _, d := range []shape.Direction{shape.Download, shape.Upload} { // as a policy lists them
		if slices.Contains(e.Directions, d) {
			keys = append(keys, "shaper."+d.String())
		}
	}
	verb := "is"
	if len(keys) > 1 {
		verb = "are"
	}
	return fmt.Sprintf("%s %s \"auto\" (95 %% of the capacity measured on this network), but this network has not been measured yet; "+
		"run %q while on it, or give the rates", strings.Join(keys, " and "), verb, e.Measure)
}

// Is matches config.ErrNeedsMeasurement.
func (e *UnmeasuredError) Is(target error) bool { return target == config.ErrNeedsMeasurement }
