// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"sync"

	"github.com/macake/macake/plan"
)

// Ownership remembers on which interfaces macake put its root qdisc. The
// live system alone cannot tell "someone replaced macake's shaper" from
// "another tool's qdisc was there before macake": the record can. A root
// macake created and someone then replaced is drift, restored; a foreign
// root with no record is never touched. The state file keeps the
// record in the state file (backend.Store); MemoryOwnership keeps it for one process.
type Ownership interface {
	// OwnedRoots returns the interfaces whose root qdisc macake created
	// and has not removed since.
	OwnedRoots() map[string]bool
	// SetRootOwned records (owned) or forgets macake's root qdisc on dev.
	SetRootOwned(dev string, owned bool) error
	// OwnedHooks returns the interfaces whose ingress qdisc macake added
	// (to hang its redirect on) and has not removed since. An ingress
	// qdisc that was there first looks the same, so only these are
	// deleted when macake lets go of the interface (issue 12).
	OwnedHooks() map[string]bool
	// SetHookOwned records (owned) or forgets macake's ingress qdisc on dev.
	SetHookOwned(dev string, owned bool) error
}

// MemoryOwnership is an Ownership held in memory: a Backend without a
// store, tests, and read-only inspections (doctor) seeded from the state
// file. Its zero value is ready to use.
type MemoryOwnership struct {
	mu    sync.Mutex
	roots map[string]bool
	hooks map[string]bool
}

// NewMemoryOwnership returns a MemoryOwnership that owns the roots on devs.
func NewMemoryOwnership(devs []string) *MemoryOwnership {
	m := &MemoryOwnership{}
	for _, d := range devs {
		m.SetRootOwned(d, true)
	}
	return m
}

// NewMemoryOwnershipOf returns a MemoryOwnership that owns the roots on
// roots and the ingress qdiscs on hooks (a state file's record).
func NewMemoryOwnershipOf(roots, hooks []string) *MemoryOwnership {
	m := NewMemoryOwnership(roots)
	for _, d := range hooks {
		m.SetHookOwned(d, true)
	}
	return m
}

// OwnedRoots returns a copy of the record.
func (m *MemoryOwnership) OwnedRoots() map[string]bool { return m.copyOf(m.roots) }

// OwnedHooks returns a copy of the ingress record.
func (m *MemoryOwnership) OwnedHooks() map[string]bool { return m.copyOf(m.hooks) }

func (m *MemoryOwnership) copyOf(set map[string]bool) map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]bool, len(set))
	for d := range set {
		out[d] = true
	}
	return out
}

// SetRootOwned records or forgets dev; it never fails.
func (m *MemoryOwnership) SetRootOwned(dev string, owned bool) error {
	m.set(&m.roots, dev, owned)
	return nil
}

// SetHookOwned records or forgets dev's ingress qdisc; it never fails.
func (m *MemoryOwnership) SetHookOwned(dev string, owned bool) error {
	m.set(&m.hooks, dev, owned)
	return nil
}

func (m *MemoryOwnership) set(set *map[string]bool, dev string, owned bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !owned {
		delete(*set, dev)
		return
	}
	if *set == nil {
		*set = map[string]bool{}
	}
	(*set)[dev] = true
}

// recordOwnership updates o after op ran: a shaper put on an interface
// (not an IFB, which is macake's by name) makes its root macake's, and an
// ingress qdisc added makes that macake's; removing (or forgetting) either
// gives it up.
func recordOwnership(o Ownership, op plan.Op) error {
	if op.Kind == KindIngress {
		return o.SetHookOwned(op.ID, op.Action != plan.Remove)
	}
	if op.Kind != KindShaper {
		return nil
	}
	if _, ifb := IFBSlot(op.ID); ifb {
		return nil
	}
	return o.SetRootOwned(op.ID, op.Action != plan.Remove)
}

// recordIntent records, before op runs, what a kill in the middle of it
// would otherwise leave unrecorded: the ingress qdisc macake adds. Were it
// recorded after the kernel's answer, a process killed between the two
// would leave an ingress qdisc no record calls macake's, which down then
// leaves behind as if it had been there first. A record of a qdisc that
// never came is harmless: Observe forgets a hook that is not live.
func recordIntent(o Ownership, op plan.Op) error {
	if op.Kind == KindIngress && op.Action == plan.Create {
		return o.SetHookOwned(op.ID, true)
	}
	return nil
}

// forgetIntent takes back recordIntent for an op that failed or never ran:
// the ingress qdisc it would have added may be someone else's that
// appeared meanwhile (the kernel then refuses macake's).
func forgetIntent(o Ownership, op plan.Op) {
	if op.Kind == KindIngress && op.Action == plan.Create {
		o.SetHookOwned(op.ID, false)
	}
}
