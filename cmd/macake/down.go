// SPDX-License-Identifier: Apache-2.0

package main

var downCmd = &command{
	name:  "down",
	args:  "",
	short: "Remove everything macake owns (anchor, pipes, pf reference); idempotent and safe after a crash.",
}

func init() { downCmd.run = notImplemented(downCmd) }
