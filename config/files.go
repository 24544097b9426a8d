// SPDX-License-Identifier: Apache-2.0

package config

// IsPolicyFile reports whether a directory entry named name is a policy
// file Load reads (*.toml, not hidden, not an editor's leftover), for
// callers that must see the same files Load does (a saved plan's
// fingerprint of the policies it was made from).
func IsPolicyFile(name string) bool { return !ignored(name) }
