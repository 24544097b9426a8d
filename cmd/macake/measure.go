// SPDX-License-Identifier: Apache-2.0

package main

var measureCmd = &command{
	name:  "measure",
	args:  "[--link NAME] [--server URL]",
	short: "Measure idle baseline, capacity both ways and bloat under load; save to the state file.",
}

func init() { measureCmd.run = notImplemented(measureCmd) }
