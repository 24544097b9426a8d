// SPDX-License-Identifier: Apache-2.0

package main

var watchCmd = &command{
	name:  "watch",
	args:  "[--teardown-on-exit]",
	short: "Run the daemon: reconcile on file and link changes, repair drift, run the controllers.",
}

func init() { watchCmd.run = notImplemented(watchCmd) }
