// SPDX-License-Identifier: Apache-2.0

package backend

import "time"

// Store is what a backend keeps in the state file, through the one handle
// on it (state.File), or in memory (MemoryStore: tests, a dry run, doctor,
// which must never write the state file). Each backend takes the part it
// needs (pfdn.TokenStore, tc.Ownership). Every Set method returns only
// once the change is durable, or a crash could leak what it records.
type Store interface {
	// PFToken returns the pf enable token held, "" for none.
	PFToken() string
	// SetPFToken records token ("" to forget it) and forgets any
	// EnableIntent in the same write: the intent is resolved.
	SetPFToken(token string) error
	// EnableIntent returns the intent recorded before a `pfctl -E` whose
	// token was never saved, if any.
	EnableIntent() (EnableIntent, bool)
	// SetEnableIntent records in (nil forgets it).
	SetEnableIntent(in *EnableIntent) error

	// OwnedRoots returns the interfaces whose root qdisc macake created
	// and has not removed since.
	OwnedRoots() map[string]bool
	// SetRootOwned records (owned) or forgets macake's root qdisc on dev.
	SetRootOwned(dev string, owned bool) error
	// OwnedHooks returns the interfaces whose ingress qdisc macake added
	// and has not removed since.
	OwnedHooks() map[string]bool
	// SetHookOwned records (owned) or forgets macake's ingress qdisc on dev.
	SetHookOwned(dev string, owned bool) error

	// Slots returns every link name that holds a slot, including links
	// removed from the config since: plans name the leftovers of removed
	// links with them.
	Slots() map[string]int
}

// EnableIntent is what macake records, durably, just before it runs
// `pfctl -E`: when, and which references pf held then. pf hands the token
// back only on pfctl's stderr, so a macake killed after pfctl took the
// reference but before the token was saved would otherwise leak that
// reference for good. From the intent the next run finds the token in
// `pfctl -s References` instead: one taken by pfctl since the intent,
// that was not there before.
type EnableIntent struct {
	// At is when the intent was recorded (wall clock).
	At time.Time
	// Before are the tokens pf held just before, sorted.
	Before []string
}
