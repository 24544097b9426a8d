// SPDX-License-Identifier: Apache-2.0

package main

var doctorCmd = &command{
	name:  "doctor",
	args:  "[--strict] [--json]",
	short: "Check what this machine supports and what is missing, with fixes.",
}

func init() { doctorCmd.run = notImplemented(doctorCmd) }
