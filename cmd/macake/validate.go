// SPDX-License-Identifier: Apache-2.0

package main

var validateCmd = &command{
	name:  "validate",
	args:  "[--json]",
	short: "Parse and check every policy file; print FILE:LINE:COL: message per problem.",
}

func init() { validateCmd.run = notImplemented(validateCmd) }
