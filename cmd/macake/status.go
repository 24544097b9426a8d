// SPDX-License-Identifier: Apache-2.0

package main

var statusCmd = &command{
	name:  "status",
	args:  "[--json] [--follow]",
	short: "Show links, the matched link per interface, live pipes and rates, controller state.",
}

func init() { statusCmd.run = notImplemented(statusCmd) }
