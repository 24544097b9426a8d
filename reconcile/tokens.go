// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/state"
)

// StateTokens is the pfdn.TokenStore on the state file: the pf enable token
// lives in State.PFToken, and every change is written to Dir atomically
// before SetPFToken returns. The intent recorded before `pfctl -E`
// (State.PFEnablePending) is saved the same way, so a crash between
// pfctl taking the reference and the token being saved leaves what the
// next run needs to find it. It shares State with the rest of the
// run (slots, profiles), so a save also writes those; callers hold the
// state lock (Lock) while they change the system.
type StateTokens struct {
	// Dir is the state directory.
	Dir string
	// State is the loaded state file; SetPFToken changes and saves it.
	State *state.State

	mu sync.Mutex
}

// PFToken returns the token the state file holds, "" for none.
func (t *StateTokens) PFToken() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.State.PFToken
}

// SetPFToken records token ("" clears it) and saves the state file.
func (t *StateTokens) SetPFToken(token string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, oldPending := t.State.PFToken, t.State.PFEnablePending
	t.State.PFToken, t.State.PFEnablePending = token, nil
	if err := state.Save(t.Dir, t.State); err != nil {
		t.State.PFToken, t.State.PFEnablePending = old, oldPending
		return fmt.Errorf("saving the pf token in the state file: %w", err)
	}
	return nil
}

// EnableIntent returns the interrupted `pfctl -E` the state file records.
func (t *StateTokens) EnableIntent() (pfdn.EnableIntent, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.State.PFEnablePending
	if p == nil {
		return pfdn.EnableIntent{}, false
	}
	return pfdn.EnableIntent{At: p.At, Before: slices.Clone(p.Before)}, true
}

// SetEnableIntent records in (nil forgets it) and saves the state file
// before it returns, so that pfctl -E runs only once the intent is durable.
func (t *StateTokens) SetEnableIntent(in *pfdn.EnableIntent) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.State.PFEnablePending
	if in == nil && old == nil {
		return nil
	}
	t.State.PFEnablePending = nil
	if in != nil {
		t.State.PFEnablePending = &state.PFEnablePending{At: in.At, Before: slices.Clone(in.Before)}
	}
	if err := state.Save(t.Dir, t.State); err != nil {
		t.State.PFEnablePending = old
		return fmt.Errorf("saving the pending pf reference in the state file: %w", err)
	}
	return nil
}

// Slots returns a copy of the state's slot allocation (for
// BackendConfig.KnownLinks).
func (t *StateTokens) Slots() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.State.Slots)
}

// Save writes the whole state file under the same lock as SetPFToken.
func (t *StateTokens) Save() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return state.Save(t.Dir, t.State)
}

// Update changes the state under the lock and saves it.
func (t *StateTokens) Update(change func(s *state.State)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	change(t.State)
	return state.Save(t.Dir, t.State)
}

// ReleaseSlots drops the slots of names (Desire.Released) and saves the
// state file when that changes it. Callers release only after an apply
// left the live state matching: until then the slot is what proves the
// removed link's leftover pipes are macake's.
func (t *StateTokens) ReleaseSlots(names []string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := false
	for _, n := range names {
		if _, ok := t.State.Slots[n]; ok {
			delete(t.State.Slots, n)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := state.Save(t.Dir, t.State); err != nil {
		return fmt.Errorf("releasing the slots of removed links: %w", err)
	}
	return nil
}

// OwnedRoots returns the interfaces whose root qdisc the tc backend
// created (State.TCOwnedRoots); it makes StateTokens a tc.Ownership.
func (t *StateTokens) OwnedRoots() map[string]bool { return t.owned(&t.State.TCOwnedRoots) }

// OwnedHooks returns the interfaces whose ingress qdisc the tc backend
// added (State.TCOwnedHooks).
func (t *StateTokens) OwnedHooks() map[string]bool { return t.owned(&t.State.TCOwnedHooks) }

// SetRootOwned records (owned) or forgets that the tc backend's root
// qdisc is on dev, and saves the state file when that changes anything.
func (t *StateTokens) SetRootOwned(dev string, owned bool) error {
	if err := t.setOwned(&t.State.TCOwnedRoots, dev, owned); err != nil {
		return fmt.Errorf("recording macake's root qdisc on %s in the state file: %w", dev, err)
	}
	return nil
}

// SetHookOwned records (owned) or forgets that the tc backend added the
// ingress qdisc on dev, and saves the state file when that changes
// anything.
func (t *StateTokens) SetHookOwned(dev string, owned bool) error {
	if err := t.setOwned(&t.State.TCOwnedHooks, dev, owned); err != nil {
		return fmt.Errorf("recording macake's ingress qdisc on %s in the state file: %w", dev, err)
	}
	return nil
}

func (t *StateTokens) owned(list *[]string) map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]bool, len(*list))
	for _, dev := range *list {
		out[dev] = true
	}
	return out
}

// setOwned adds or removes dev in the sorted list and saves the state.
func (t *StateTokens) setOwned(list *[]string, dev string, owned bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *list
	next := slices.Clone(old)
	slices.Sort(next)
	i, found := slices.BinarySearch(next, dev)
	if found == owned {
		return nil
	}
	if owned {
		next = slices.Insert(next, i, dev)
	} else {
		next = slices.Delete(next, i, i+1)
	}
	*list = next
	if err := state.Save(t.Dir, t.State); err != nil {
		*list = old
		return err
	}
	return nil
}
