// SPDX-License-Identifier: Apache-2.0

package main

var benchCmd = &command{
	name:  "bench",
	args:  "[--json]",
	short: "One-shot throughput and latency under load, for A/B comparisons.",
}

func init() { benchCmd.run = notImplemented(benchCmd) }
