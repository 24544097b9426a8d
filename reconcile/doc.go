// SPDX-License-Identifier: Apache-2.0

// Package reconcile makes the live shaping state match the policy files,
// level-triggered: every pass recomputes everything from scratch and never
// acts on what an event said.
//
// Pass is the one reconcile pass, and every command that plans or changes
// the live shaping runs it: `macake apply` and `plan` once, `down` as a
// teardown, `doctor` to see the drift, and `macake watch` (package
// daemon) on every trigger:
//
//	LoadPolicies  policy files and daemon settings        → Policies
//	Match         policies + link facts                    → Selection (pure)
//	Desired       selection + state file (+ controller rates) → Desire (pure)
//	Backend.Plan  desired vs. live (observes, never changes)  → plan.Plan
//	Apply         executes the plan's ops in order, stopping at the first failure
//
// Desired is pure: the same inputs give the same desired state, and it never
// touches the system. Backend.Plan only reads; Apply is the only step that
// changes anything. A failed Apply leaves a state that the next pass
// converges from, because the next pass plans from what is live, not from
// what the failed one meant to do.
//
// Around the pass the package keeps what it works from: the state file
// shared with the backend (state.File), the last good copies of the policy
// files (LastGoodStore), the state lock (Lock), and the policy's controller
// configuration (ControllerConfig). OpenBackend chooses the backend by name
// from a table: "pf" (pf + dummynet) on macOS, and on Linux when
// MACAKE_PFCTL/MACAKE_DNCTL point at the emulator; "tc" on Linux;
// MACAKE_BACKEND overrides the choice.
package reconcile
