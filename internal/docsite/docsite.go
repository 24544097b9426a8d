// SPDX-License-Identifier: Apache-2.0

// Package docsite is where macake's documentation is for a person who
// has only the installed binary: every message, help text and file the
// binary writes that points to the docs points here, never to a path in
// a source tree the user does not have.
package docsite

// Repo is the project's home.
const Repo = "https://github.com/macake/macake"

// Docs is the documentation's directory: the pages of docs/ are under it.
const Docs = Repo + "/blob/main/docs/"

// Page returns the address of a page of docs/ ("CONFIG.md"), at the
// heading whose anchor is section ("" for the top).
func Page(page, section string) string {
	if section == "" {
		return Docs + page
	}
	return Docs + page + "#" + section
}
