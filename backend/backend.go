// SPDX-License-Identifier: Apache-2.0

// Package backend is the seam between the reconciler and the kernel: the
// Backend interface every shaper implements (pf + dummynet in backend/pfdn,
// tc in backend/tc), the small optional capabilities some of them add, the
// backend-neutral view of live shaping they report, and the errors that
// mean "this machine cannot shape" or "this plan may be shown but not
// applied". It runs nothing itself.
package backend

import (
	"context"
	"errors"
	"time"

	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// Backend turns a backend-neutral desired state into the system's own
// objects: pf + dummynet on macOS (pfdn), tc on Linux.
type Backend interface {
	// Info describes the backend, for people and for the planner.
	Info() Info
	// Plan observes the live system and returns the ordered ops that make
	// it match desired (only owned objects; foreign ones never appear as
	// "to remove"). It never changes the system. It may return a plan
	// together with a *BlockedError, which forbids applying it.
	Plan(ctx context.Context, desired shape.State) (plan.Plan, error)
	// Execute runs one op's commands; it may be called again after a
	// failure.
	Execute(ctx context.Context, op plan.Op) error
	// SetRate is the controller's hot path: one command updating one
	// direction of one link.
	SetRate(ctx context.Context, link shape.Link, dir shape.Direction, p shape.Pipe) error
	// Teardown removes everything the backend owns and releases what it
	// holds (pfdn: the pf enable reference); idempotent and safe after a
	// crash. It returns the plan it executed.
	Teardown(ctx context.Context) (plan.Plan, error)
}

// Info is what a backend says about itself.
type Info struct {
	// Name is the backend's table key: "pf" or "tc".
	Name string
	// Scope names what the backend owns, for the progress line "Reading
	// live state (SCOPE) … ok", e.g. `pf anchor "com.apple/macake",
	// dummynet pipes 48001-48998`.
	Scope string
	// System names the live state in "No changes. Live SYSTEM state
	// matches DIR.", e.g. "pf/dummynet".
	System string
	// SharedGroup titles the plan block of ops that belong to no single
	// link (plan.TextOptions.SharedGroup), e.g. "pf".
	SharedGroup string
	// MaxSlots is how many links it can shape at once.
	MaxSlots int
	// KernelOverhead is true when the backend's shaper adds each packet's
	// overhead and mpu itself (tc: htb and cake take them as options), so
	// its rates are wire rates, and false when the shaper counts packet
	// bytes only (dummynet), so the rate it gets is lowered to make up for
	// the overhead.
	KernelOverhead bool
	// Limits are the largest rate and queue its shaper takes. Policies
	// are checked against them where the backend is known, and measured
	// capacities above them are capped there with a warning.
	Limits shape.Limits
}

// BatchExecutor is a Backend that can carry out a plan's ops with fewer
// processes than one per command (tc: one `tc -batch -` for all of a
// plan's tc commands). It may run them in another order where that is
// safe, and reports each op to done as it is carried out (err nil) or
// fails (then it stops and returns the error, which names the op). Apply
// uses it instead of Execute op by op.
type BatchExecutor interface {
	ExecuteBatch(ctx context.Context, ops []plan.Op, done func(i int, err error)) error
}

// SlotReader is a Backend that can tell how the live system uses its
// slots, for rebuilding a lost state file and for never taking a slot
// whose objects are another tool's.
type SlotReader interface {
	LiveSlots(ctx context.Context) (SlotUse, error)
}

// ShaperReader is a Backend that can list the shapers macake owns as they
// are live (for a status without a daemon) and name the one of a link's
// direction (for status).
type ShaperReader interface {
	LiveShapers(ctx context.Context) ([]LiveShaper, error)
	// ShaperName names the object that shapes one direction of a link,
	// e.g. "pipe 48001"; "" when it has no short name.
	ShaperName(l shape.Link, d shape.Direction) string
}

// StatsReader is a Backend that can read what its shapers are doing, as
// `tc -s` shows it: the traffic they took, what they dropped and what is
// queued in them now. A read is one read-only command (pf: `dnctl list`;
// tc: `tc -s -j qdisc show`), never one per probe or per rate change:
// callers read on the drift tick or when someone asks for the status.
// ShaperStats is safe to call concurrently with the other methods.
type StatsReader interface {
	ShaperStats(ctx context.Context) ([]ShaperStats, error)
}

// ShaperStats are one live shaper's counters. Name is ShaperReader's name
// for the shaper ("pipe 48001", "qdisc 4d4b: on wan0"), which is how a
// caller that knows the link finds its shapers. The counters are the
// kernel's own, cumulative since the shaper was created: they restart at
// zero when it is re-created (a reboot, `dnctl flush`, a replaced root
// qdisc), which rate() in Prometheus takes as a counter reset.
type ShaperStats struct {
	Name string
	// Bytes and Packets are what the shaper took in (dummynet: every
	// packet that reached the pipe, dropped ones included) or sent (tc:
	// the root qdisc's "Sent").
	Bytes, Packets uint64
	// Drops are the packets the shaper dropped (its queue was full).
	Drops uint64
	// BacklogBytes and BacklogPackets are queued in it now.
	BacklogBytes, BacklogPackets uint64
	// Overlimits counts the times the shaper held a packet back for the
	// rate (tc only; 0 for dummynet, which does not count them).
	Overlimits uint64
	// Tins are CAKE's tins (its priority classes), lowest priority first
	// as tc prints them; nil for a shaper without tins (htb, dummynet).
	Tins []TinStats
}

// TinStats are one CAKE tin's counters (cumulative since the qdisc was
// created) and its state at the reading, as `tc -s qdisc show` prints
// them in CAKE's table.
type TinStats struct {
	// Name is the tin's class, as a label: "bulk", "best_effort",
	// "video", "voice" (diffserv3 and diffserv4 name theirs; besteffort's
	// one tin is "best_effort"), else "tin0" … "tin7".
	Name string
	// ThresholdBits is the rate the tin keeps its priority up to, bit/s.
	ThresholdBits uint64
	// Bytes and Packets entered the tin: every packet CAKE queued in it,
	// the ones it later dropped included (tc's "bytes" and "pkts").
	Bytes, Packets uint64
	// Drops are packets CAKE dropped (its AQM, or memlimit overflow),
	// ECNMarks packets it marked instead, ACKDrops the TCP ACKs its ACK
	// filter removed.
	Drops, ECNMarks, ACKDrops uint64
	// BacklogBytes are queued in the tin now.
	BacklogBytes uint64
	// PeakDelay, AvgDelay and BaseDelay are the queueing delay CAKE
	// measures of the packets it sends from the tin: its peak, its
	// moving average, and its floor.
	PeakDelay, AvgDelay, BaseDelay time.Duration
	// SparseFlows, BulkFlows and UnresponsiveFlows count the tin's flows
	// now by how CAKE schedules them.
	SparseFlows, BulkFlows, UnresponsiveFlows uint64
}

// BlindPlanner is a Backend whose live state some users may not read (pf
// and dummynet without root). PlanUnobserved is Plan against a system
// where macake owns nothing, made without reading anything, for a dry run
// by such a user.
type BlindPlanner interface {
	PlanUnobserved(desired shape.State) (plan.Plan, error)
}

// LinkPlanner is a Backend that shares objects between links (pf's
// anchor holds every link's rules) and so needs its own way to plan the
// changes of one link alone (`macake apply --link NAME`, `down --link
// NAME`): PlanLink is Plan, but only link's objects change and every
// other link's live objects stay exactly as they are, even inside a
// shared object. A backend whose objects each belong to one link (tc)
// needs none: its plan, filtered to the link's ops, is that plan.
type LinkPlanner interface {
	PlanLink(ctx context.Context, desired shape.State, link string) (plan.Plan, error)
}

// SlotUse is what the live system says about slots (SlotReader).
type SlotUse struct {
	// Interfaces maps an interface to the slot macake's live shaping on it
	// uses.
	Interfaces map[string]int
	// Foreign are the slots whose objects exist but that nothing of
	// macake's accounts for besides the state file (pf: a pipe in the range
	// that no rule in macake's anchor names). No new link takes one.
	Foreign map[int]bool
}

// LiveShaper is one shaper macake owns, as read from the system.
type LiveShaper struct {
	// Name is e.g. "pipe 48001"; Interface and Direction come from the
	// rule that sends traffic to it ("" when no rule does).
	Name       string
	Interface  string
	Direction  string
	RateBits   int64
	QueueBytes int64
}

// ErrUnavailable is matched (errors.Is) by errors that mean this machine
// cannot shape: no backend for this system, its tools are missing, or the
// caller may not use them.
var ErrUnavailable = errors.New("shaping backend unavailable")

// ErrNeedsRoot is matched, besides ErrUnavailable, by a backend's refusal
// of a caller who is not root (pfctl and dnctl without root). A dry run
// may then plan without the live state (BlindPlanner).
var ErrNeedsRoot = errors.New("it needs root")

// Unavailable reports whether err means that shaping is impossible here:
// exit status 69.
func Unavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// BlockedError is a plan that must not be applied although Plan made it:
// something outside macake's objects, which only a person can fix, keeps
// them from taking effect (pf: the main ruleset lacks the dummynet-anchor
// line, so pf never evaluates macake's anchor). Plan returns it together
// with the plan, so that a dry run still shows what would change. Its
// texts are the backend's; the callers only place them.
type BlockedError struct {
	// Kind names the obstacle in the log's drift vocabulary, e.g.
	// "hook_missing".
	Kind string
	// Problem is the whole explanation with the fix (Error).
	Problem string
	// Detail says in one line what is wrong, and Fix what to do, for the
	// daemon's log; Resolved is the log line when it is fixed again.
	Detail, Fix, Resolved string
	// NotApplied is the one-line outcome of a reconcile it stopped.
	NotApplied string
	// InPlace replaces a plan's "No changes." line when the plan has no
	// ops: macake's objects are in place but not in effect.
	InPlace string
}

// Error returns Problem.
func (e *BlockedError) Error() string { return e.Problem }

// Blocked returns err's *BlockedError, if it has one.
func Blocked(err error) (*BlockedError, bool) {
	return errors.AsType[*BlockedError](err)
}
