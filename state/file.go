// SPDX-License-Identifier: Apache-2.0

package state

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/macake/macake/backend"
)

// File is the one handle on the state file: the backend.Store the
// backends record what they own in, and the slot allocation the pass
// saves. The pf enable token lives in State.PFToken, and every change is
// written to Dir atomically before its Set method returns. The intent recorded before `pfctl -E`
// (State.PFEnablePending) is saved the same way, so a crash between
// pfctl taking the reference and the token being saved leaves what the
// next run needs to find it. It shares State with the rest of the
// run (slots, profiles), so a save also writes those; callers hold the
// state lock (Lock) while they change the system.
type File struct {
	// Dir is the state directory; "" keeps every change in memory
	// (InMemory).
	Dir string
	// State is the loaded state file; SetPFToken changes and saves it.
	State *State
	// Unrecorded keeps a change that cannot be written because the disk
	// takes no write (read-only, full: Unwritable) in memory, notes it
	// (Unrecorded) and reports success, so that `down` removes the
	// shaping whatever the disk: the file then names slots and a pf token
	// that are gone, which the next apply or down corrects (a pf token pf
	// no longer knows counts as released).
	Unrecorded bool

	mu sync.Mutex
	// unrecorded is the first write lost to Unrecorded.
	unrecorded error
}

// NotRecorded returns the first change the File could not write to the
// disk and kept in memory instead (File.Unrecorded), nil when none.
func (t *File) NotRecorded() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unrecorded
}

// PFToken returns the token the state file holds, "" for none.
func (t *File) PFToken() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.State.PFToken
}

// SetPFToken records token ("" clears it) and saves the state file.
func (t *File) SetPFToken(token string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, oldPending := t.State.PFToken, t.State.PFEnablePending
	t.State.PFToken, t.State.PFEnablePending = token, nil
	if err := t.save(); err != nil {
		t.State.PFToken, t.State.PFEnablePending = old, oldPending
		return fmt.Errorf("saving the pf token in the state file: %w", err)
	}
	return nil
}

// EnableIntent returns the interrupted `pfctl -E` the state file records.
func (t *File) EnableIntent() (backend.EnableIntent, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.State.PFEnablePending
	if p == nil {
		return backend.EnableIntent{}, false
	}
	return backend.EnableIntent{At: p.At, Before: slices.Clone(p.Before)}, true
}

// SetEnableIntent records in (nil forgets it) and saves the state file
// before it returns, so that pfctl -E runs only once the intent is durable.
func (t *File) SetEnableIntent(in *backend.EnableIntent) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.State.PFEnablePending
	if in == nil && old == nil {
		return nil
	}
	t.State.PFEnablePending = nil
	if in != nil {
		t.State.PFEnablePending = &PFEnablePending{At: in.At, Before: slices.Clone(in.Before)}
	}
	if err := t.save(); err != nil {
		t.State.PFEnablePending = old
		return fmt.Errorf("saving the pending pf reference in the state file: %w", err)
	}
	return nil
}

// Slots returns a copy of the state's slot allocation (for
// BackendConfig.KnownLinks).
func (t *File) Slots() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.State.Slots)
}

// Save writes the whole state file under the same lock as SetPFToken.
func (t *File) Save() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.save()
}

// Update changes the state under the lock and saves it.
func (t *File) Update(change func(s *State)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	change(t.State)
	return t.save()
}

// ReleaseSlots drops the slots of names (Desire.Released) and saves the
// state file when that changes it. Callers release only after an apply
// left the live state matching: until then the slot is what proves the
// removed link's leftover pipes are macake's.
func (t *File) ReleaseSlots(names []string) error {
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
	if err := t.save(); err != nil {
		return fmt.Errorf("releasing the slots of removed links: %w", err)
	}
	return nil
}

// OwnedRoots returns the interfaces whose root qdisc the tc backend
// created (State.TCOwnedRoots); it makes File a tc.Ownership.
func (t *File) OwnedRoots() map[string]bool { return t.owned(&t.State.TCOwnedRoots) }

// OwnedHooks returns the interfaces whose ingress qdisc the tc backend
// added (State.TCOwnedHooks).
func (t *File) OwnedHooks() map[string]bool { return t.owned(&t.State.TCOwnedHooks) }

// SetRootOwned records (owned) or forgets that the tc backend's root
// qdisc is on dev, and saves the state file when that changes anything.
func (t *File) SetRootOwned(dev string, owned bool) error {
	if err := t.setOwned(&t.State.TCOwnedRoots, dev, owned); err != nil {
		return fmt.Errorf("recording macake's root qdisc on %s in the state file: %w", dev, err)
	}
	return nil
}

// SetHookOwned records (owned) or forgets that the tc backend added the
// ingress qdisc on dev, and saves the state file when that changes
// anything.
func (t *File) SetHookOwned(dev string, owned bool) error {
	if err := t.setOwned(&t.State.TCOwnedHooks, dev, owned); err != nil {
		return fmt.Errorf("recording macake's ingress qdisc on %s in the state file: %w", dev, err)
	}
	return nil
}

func (t *File) owned(list *[]string) map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]bool, len(*list))
	for _, dev := range *list {
		out[dev] = true
	}
	return out
}

// setOwned adds or removes dev in the sorted list and saves the state.
func (t *File) setOwned(list *[]string, dev string, owned bool) error {
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
	if err := t.save(); err != nil {
		*list = old
		return err
	}
	return nil
}

// InMemory returns a File on a copy of st that never writes: what a
// backend records while a read-only run (a dry run, doctor, status)
// looks stays in this process.
func InMemory(st *State) *File {
	return &File{State: st.Clone()}
}

// save writes the state file, unless the File is in memory only.
func (t *File) save() error {
	if t.Dir == "" {
		return nil
	}
	err := Save(t.Dir, t.State)
	if err != nil && t.Unrecorded && Unwritable(err) {
		if t.unrecorded == nil {
			t.unrecorded = err
		}
		return nil
	}
	return err
}
