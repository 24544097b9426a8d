// SPDX-License-Identifier: Apache-2.0

package main

var monitorCmd = &command{
	name:  "monitor",
	args:  "[--json]",
	short: "Sample latency to the reflectors continuously, without shaping.",
}

func init() { monitorCmd.run = notImplemented(monitorCmd) }
