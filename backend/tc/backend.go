// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// Backend shapes Linux links with tc. It satisfies the reconciler's
// Backend contract (Plan, Execute, SetRate) and adds Teardown. It is safe
// for concurrent use: the controllers call SetRate while the reconciler
// plans and executes.
type Backend struct {
	// Runner runs every command (execrun.Exec in production).
	Runner execrun.Runner
	// Tools names tc, ip and unshare, and optionally a network namespace.
	Tools Tools

	// Owners records on which interfaces macake put its root qdisc; nil
	// keeps the record in memory for the life of the Backend.
	Owners Ownership

	// Netlink, when set, carries SetRate to the kernel and reads the
	// live state (Observe, ShaperStats) without a child process (Linux);
	// nil runs `tc` and `ip` for them.
	Netlink *Netlink

	mu sync.Mutex
	// caps is probed once, on first use, unless set with SetCapabilities.
	caps *Capabilities
	// cakeTried holds the verdict on each CAKE option set tried (by
	// cakeTrialKey): nil when the kernel and tc took it.
	cakeTried map[string]*CakeRefusal
	// cakeUntriable is set once a trial could not run at all.
	cakeUntriable bool
	// memOwners is the record when Owners is nil.
	memOwners MemoryOwnership
}

func (b *Backend) owners() Ownership {
	if b.Owners != nil {
		return b.Owners
	}
	return &b.memOwners
}

// New returns a Backend that runs r with DefaultTools.
func New(r execrun.Runner) *Backend {
	return &Backend{Runner: r, Tools: DefaultTools()}
}

// SetCapabilities fixes the kernel capabilities instead of probing them
// (tests; a daemon that probed already).
func (b *Backend) SetCapabilities(c Capabilities) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.caps = &c
}

// Capabilities returns what the kernel supports, probing it on first use.
// A kernel that gains sch_cake later is noticed by a new Backend (a restart
// of `macake watch`), never in the middle of a run.
func (b *Backend) Capabilities(ctx context.Context) Capabilities {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.caps == nil {
		c := Probe(ctx, b.Runner, b.Tools)
		b.caps = &c
	}
	return *b.caps
}

// Observe reads the live state, with the kernel's capabilities; within a
// pass (backend.WithLiveReading) once, until an op is carried out.
func (b *Backend) Observe(ctx context.Context) (Live, error) {
	return backend.ReadLive(ctx, b.observe)
}

func (b *Backend) observe(ctx context.Context) (Live, error) {
	var live Live
	var err error
	if b.Netlink != nil {
		// No process: the drift check and every pass read this way.
		live, err = b.Netlink.Observe(ctx, b.Tools)
	} else {
		live, err = Observe(ctx, b.Runner, b.Tools)
	}
	if err != nil {
		return live, fmt.Errorf("tc: %w", err)
	}
	live.Caps = b.Capabilities(ctx)
	o := b.owners()
	recorded := o.OwnedRoots()
	live.OwnedRoots = OwnedRoots(live, recorded)
	for name := range live.OwnedRoots {
		if !recorded[name] {
			// Learnt from the live handle: keep it, so a shaper set up
			// before the record existed (or while the state file was
			// lost) is repaired too once someone replaces it. Best
			// effort: a read-only run (plan as a user) cannot save, and
			// the live handle counts this time regardless.
			o.SetRootOwned(name, true)
		}
	}
	live.OwnedHooks = o.OwnedHooks()
	for name := range live.OwnedHooks {
		if h := live.Devices[name].Hook(); h == nil || h.Kind != "ingress" {
			// macake's ingress qdisc is gone (someone deleted it, or the
			// interface): a later one is not macake's. Best effort, as above.
			delete(live.OwnedHooks, name)
			o.SetHookOwned(name, false)
		}
	}
	return live, nil
}

// OwnedRoots returns the interfaces whose root is macake's to restore: the
// recorded ones, plus every interface (not an IFB, macake's by name) where
// macake's root handle is live, since 4d4b: is macake's by definition.
func OwnedRoots(live Live, recorded map[string]bool) map[string]bool {
	out := make(map[string]bool, len(recorded))
	for name := range recorded {
		out[name] = true
	}
	for name, dev := range live.Devices {
		if _, ifb := IFBSlot(name); !ifb && dev.ownsRoot() {
			out[name] = true
		}
	}
	return out
}

// Plan observes the live system and returns the ordered operations that
// make it match desired. Only owned objects appear; foreign ones are
// reported in the plan's warnings when they are in the way. A link that
// cannot be rendered (ValidateLink) is skipped with a warning and keeps
// what is live (Diff), so one bad link never blocks the others (issue
// 27: a policy for ifb-macake0 failed every pass for every link).
func (b *Backend) Plan(ctx context.Context, desired shape.State) (plan.Plan, error) {
	if err := uniqueNames(desired); err != nil {
		return plan.Plan{}, fmt.Errorf("tc: %w", err)
	}
	live, err := b.Observe(ctx)
	if err != nil {
		return plan.Plan{}, err
	}
	if live.Caps.ShapesWithCake() && live.Caps.Tried {
		live.CakeRefusals = b.cakeRefusals(ctx, desired)
	}
	return Diff(desired, live), nil
}

// Execute runs one operation's commands in order and stops at the first
// failure. Running it again after a failure is safe; a partly applied
// operation is completed by the next Plan, which starts from what is live.
func (b *Backend) Execute(ctx context.Context, op plan.Op) error {
	defer backend.ForgetLiveReading(ctx)
	if err := recordIntent(b.owners(), op); err != nil {
		return fmt.Errorf("tc: %s %s: %w", op.Action, op.Label, err)
	}
	for _, cmd := range op.Commands {
		if len(cmd.Argv) == 0 {
			forgetIntent(b.owners(), op)
			return fmt.Errorf("tc: %s %s: empty command", op.Action, op.Label)
		}
		res, err := b.Runner.Run(ctx, cmd)
		if _, err = execrun.Check(cmd, res, err); err != nil {
			forgetIntent(b.owners(), op)
			return fmt.Errorf("tc: %s %s: %w", op.Action, op.Label, hint(err))
		}
	}
	if err := recordOwnership(b.owners(), op); err != nil {
		return fmt.Errorf("tc: %s %s: %w", op.Action, op.Label, err)
	}
	return nil
}

// SetRate is the controller's hot path: it changes one direction of an
// applied link in place. With Netlink it starts no process (the bfifo
// limit, then the htb class; or the CAKE qdisc); without, exactly one: for
// htb the class rate and the bfifo limit change together through `tc
// -batch -`, for CAKE one `tc qdisc change` (CAKE manages its own queue,
// so the pipe's queue size is not used). It fails, and changes nothing,
// when the link's shaper is not in place: the reconciler then re-plans.
func (b *Backend) SetRate(ctx context.Context, link shape.Link, dir shape.Direction, p shape.Pipe) error {
	if dir != shape.Upload && dir != shape.Download {
		return fmt.Errorf("tc: set rate of link %q: unknown direction %v", link.Name, dir)
	}
	if !p.Shaped() {
		return fmt.Errorf("tc: set rate of link %q: the %s is not shaped, so it has no rate to set", link.Name, dir)
	}
	l := link
	if dir == shape.Upload {
		l.Upload = p
	} else {
		l.Download = p
	}
	if err := ValidateLink(l); err != nil {
		return fmt.Errorf("tc: set rate: %w", err)
	}
	spec := specFor(l, dir, b.Capabilities(ctx).ShapesWithCake())
	if b.Netlink != nil {
		if err := b.Netlink.setRate(ctx, spec); err != nil {
			return fmt.Errorf("tc: set %s rate of link %q to %s: %w", dir, link.Name, shape.FormatRate(p.RateBits), err)
		}
		return nil
	}
	cmd := b.Tools.setRateCommand(spec)
	res, err := b.Runner.Run(ctx, cmd)
	if _, err = execrun.Check(cmd, res, err); err != nil {
		return fmt.Errorf("tc: set %s rate of link %q to %s: %w", dir, link.Name, shape.FormatRate(p.RateBits), hint(err))
	}
	return nil
}

// Teardown removes everything macake owns (shapers, exemptions, redirects,
// the ingress qdiscs it alone uses, its IFB devices) and returns the plan
// it executed. It stops at the first failure, because the order keeps
// traffic flowing (a redirect is gone before its IFB), and running it again
// continues from what is left. It is idempotent. The plan runs through
// ExecuteBatch (removals keep their order), so many links take a few
// processes.
func (b *Backend) Teardown(ctx context.Context) (plan.Plan, error) {
	return backend.TeardownBatch(ctx, b)
}

// IsNotFound reports whether err came from tc or ip saying a device is
// missing, e.g. when the controller sets a rate on an interface that just
// disappeared.
func IsNotFound(err error) bool {
	var ee *execrun.Error
	return errors.As(err, &ee) && strings.Contains(string(ee.Stderr), "Cannot find device") ||
		errors.Is(err, errNoDevice)
}
