// SPDX-License-Identifier: Apache-2.0

// Package exitcode is the one home of macake's exit statuses and what
// each means. They follow BSD sysexits(3), as DESIGN.md §4 defines them. A
// launchd KeepAlive policy should not restart `watch` on Config or NoPerm:
// those need a person, and a restart loop only fills the log.
package exitcode

// The exit statuses; Statuses says what each means.
const (
	OK          = 0  // success, with or without changes
	Failure     = 1  // runtime or apply failure, including a partial apply
	Changes     = 2  // only with --detailed-exitcode: changes present or applied
	Usage       = 64 // EX_USAGE: bad flags or arguments
	Unavailable = 69 // EX_UNAVAILABLE: pfctl/dnctl (or tc) missing or unusable, or a measurement not made yet
	NoPerm      = 77 // EX_NOPERM: the command needs root
	Config      = 78 // EX_CONFIG: policy files invalid (watch: macake.toml invalid; policy errors never stop it)
)

// Status is one exit status and what it means.
type Status struct {
	// Code is the status a process exits with.
	Code int
	// Meaning is what it means, as the manual says it.
	Meaning string
}

// Statuses says what each exit status means, for the manual's EXIT
// STATUS section.
var Statuses = []Status{
	{OK, "success, with or without changes"},
	{Failure, "failure, including an apply that stopped part-way (run it again: it continues from the live state), or a saved plan that no longer fits what it was made from"},
	{Changes, "only with --detailed-exitcode: there were changes (planned in a dry run, applied otherwise)"},
	{Usage, "usage: unknown command, bad flags or arguments"},
	{Unavailable, "pfctl/dnctl (Linux: tc/ip) missing or unusable; for plan and apply also a link whose \"auto\" rates wait for 'macake measure' on this network"},
	{NoPerm, "the command needs root"},
	{Config, "a policy file or the daemon settings are invalid; nothing was changed"},
}
