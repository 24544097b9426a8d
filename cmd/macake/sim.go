// SPDX-License-Identifier: Apache-2.0

package main

var simCmd = &command{
	name:  "sim",
	args:  "[--link starlink|lte|cable|dsl | --trace FILE] [flags]",
	short: "Run controllers against a recorded or modelled link, offline.",
}

func init() { simCmd.run = notImplemented(simCmd) }
