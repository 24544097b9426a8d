// SPDX-License-Identifier: Apache-2.0

package main

var linksCmd = &command{
	name:  "links",
	args:  "[--json]",
	short: "List every policy and which one matches the current network, and why.",
}

func init() { linksCmd.run = notImplemented(linksCmd) }
