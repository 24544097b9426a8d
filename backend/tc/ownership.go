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
// root with no record is never touched. reconcile.StateTokens keeps the
// record in the state file; MemoryOwnership keeps it for one process.
type Ownership interface {
	// OwnedRoots returns the interfaces whose root qdisc macake created
	// and has not removed since.
	OwnedRoots() map[string]bool
	// SetRootOwned records (owned) or forgets macake's root qdisc on dev.
	SetRootOwned(dev string, owned bool) error
}

// MemoryOwnership is an Ownership held in memory: a Backend without a
// store, tests, and read-only inspections (doctor) seeded from the state
// file. Its zero value is ready to use.
type MemoryOwnership struct {
	mu    sync.Mutex
	roots map[string]bool
}

// NewMemoryOwnership returns a MemoryOwnership that owns the roots on devs.
func NewMemoryOwnership(devs []string) *MemoryOwnership {
	m := &MemoryOwnership{}
	for _, d := range devs {
		m.SetRootOwned(d, true)
	}
	return m
}

// OwnedRoots returns a copy of the record.
func (m *MemoryOwnership) OwnedRoots() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]bool, len(m.roots))
	for d := range m.roots {
		out[d] = true
	}
	return out
}

// SetRootOwned records or forgets dev; it never fails.
func (m *MemoryOwnership) SetRootOwned(dev string, owned bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !owned {
		delete(m.roots, dev)
		return nil
	}
	if m.roots == nil {
		m.roots = map[string]bool{}
	}
	m.roots[dev] = true
	return nil
}

// recordOwnership updates o after op ran: a shaper put on an interface
// (not an IFB, which is macake's by name) makes its root macake's; a
// shaper removed (or forgotten) gives it up.
func recordOwnership(o Ownership, op plan.Op) error {
	if op.Kind != KindShaper {
		return nil
	}
	if _, ifb := IFBSlot(op.ID); ifb {
		return nil
	}
	return o.SetRootOwned(op.ID, op.Action != plan.Remove)
}
