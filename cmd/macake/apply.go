// SPDX-License-Identifier: Apache-2.0

package main

var applyCmd = &command{
	name:  "apply",
	args:  "[--dry-run] [--detailed-exitcode] [--show-commands] [--json]",
	short: "Reconcile pf and dummynet with the policy files once; print the plan, then what was applied.",
}

func init() { applyCmd.run = notImplemented(applyCmd) }
