// SPDX-License-Identifier: Apache-2.0

// Package config reads macake's policy files (/etc/macake/links.d/*.toml,
// one link per file) strictly: unknown keys, upper-case keys, unit-less
// rates and durations and out-of-range values are all errors, and every
// problem of every file is reported at once as "FILE:LINE:COL: message".
// The daemon's settings file (macake.toml, config/settings) is decoded the
// same way (DecodeStrict).
//
// Load reads a directory and returns the valid links; Link.Rates resolves a
// direction's floor, base and ceiling (desired.Match picks the active link
// per interface from the link facts). The value types of the files (Rate,
// Size, Duration) are config/units', whose grammar flags share.
// Defaults holds every default of a policy in one place. docs/CONFIG.md
// documents every key.
package config
