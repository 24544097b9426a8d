// SPDX-License-Identifier: Apache-2.0

// Package reconcile makes the live shaping state match the policy files,
// level-triggered: every pass recomputes everything from scratch and never
// acts on what an event said.
//
// One pass is a chain of separate steps, so that `macake apply` runs it once
// and `macake watch` runs it on every trigger:
//
//	LoadPolicies  policy files and daemon settings  → Policies
//	Source.Facts  which interfaces are up, gateways → linkfacts.Facts
//	Desired       policies + facts + state file (+ controller rates) → Desire (pure)
//	Backend.Plan  desired vs. live (observes, never changes) → plan.Plan
//	Apply         executes the plan's ops in order, stopping at the first failure
//
// Desired is pure: the same inputs give the same desired state, and it never
// touches the system. Backend.Plan only reads; Apply is the only step that
// changes anything. A failed Apply leaves a state that the next pass
// converges from, because the next pass plans from what is live, not from
// what the failed one meant to do.
//
// Backends are chosen by name from a table (OpenBackend): "pf" (pf +
// dummynet, pfdn) on macOS, and on Linux when MACAKE_PFCTL/MACAKE_DNCTL point
// at the emulator; MACAKE_BACKEND overrides the choice. Lock keeps two
// mutating runs from interleaving.
package reconcile
