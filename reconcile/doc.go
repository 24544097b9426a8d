// SPDX-License-Identifier: Apache-2.0

// Package reconcile makes the live shaping state match the policy files,
// level-triggered: every pass recomputes everything from scratch and never
// acts on what an event said.
//
// Pass is the one reconcile pass, and every command that plans or changes
// the live shaping runs it: `macake apply` and `plan` once, `doctor` to
// see the drift, and `macake watch` (package daemon) on every trigger:
//
//	desired.Match    policies + link facts                      → Selection (pure)
//	desired.Desired  selection + state file + backend facts     → Desire (pure)
//	Backend.Plan     desired vs. live (observes, never changes) → plan.Plan
//	Apply            executes the plan's ops in order, stopping at the first failure
//
// Teardown is the pass whose desired state is empty (`macake down`,
// watch's shutdown), and ApplySaved applies a reviewed plan exactly
// (`macake apply FILE`) once nothing it was made from has changed. All
// three act through a Run: the backend, the state file, what to do with
// the plan, and the hooks that report it.
//
// Backend.Plan only reads; Apply is the only step that changes anything.
// A failed Apply leaves a state that the next pass converges from, because
// the next pass plans from what is live, not from what the failed one
// meant to do. The package imports no concrete backend: session.Open
// opens the one registered for this machine.
package reconcile
