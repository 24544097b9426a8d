// SPDX-License-Identifier: Apache-2.0

package main

// Exit codes follow BSD sysexits(3), as DESIGN.md §4 defines them. A launchd
// KeepAlive policy should not restart `watch` on exitConfig or exitNoPerm:
// those need a person, and a restart loop only fills the log.
const (
	exitOK          = 0  // success, with or without changes
	exitFailure     = 1  // runtime or apply failure, including a partial apply
	exitChanges     = 2  // only with --detailed-exitcode: changes present or applied
	exitUsage       = 64 // EX_USAGE: bad flags or arguments
	exitUnavailable = 69 // EX_UNAVAILABLE: pfctl/dnctl (or tc) missing or unusable, or a measurement not made yet
	exitNoPerm      = 77 // EX_NOPERM: the command needs root
	exitConfig      = 78 // EX_CONFIG: policy files invalid (watch: macake.toml invalid; policy errors never stop it)
)

// exitStatuses says what each exit status means, for the manual's EXIT
// STATUS section.
var exitStatuses = []struct {
	code    int
	meaning string
}{
	{exitOK, "success, with or without changes"},
	{exitFailure, "failure, including an apply that stopped part-way (run it again: it continues from the live state), or a saved plan that no longer fits what it was made from"},
	{exitChanges, "only with --detailed-exitcode: there were changes (planned in a dry run, applied otherwise)"},
	{exitUsage, "usage: unknown command, bad flags or arguments"},
	{exitUnavailable, "pfctl/dnctl (Linux: tc/ip) missing or unusable; for plan and apply also a link whose \"auto\" rates wait for 'macake measure' on this network"},
	{exitNoPerm, "the command needs root"},
	{exitConfig, "a policy file or the daemon settings are invalid; nothing was changed"},
}
