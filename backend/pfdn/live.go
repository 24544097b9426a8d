// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"fmt"
	"slices"

	"github.com/macake/macake/backend"
)

// Live is the pf and dummynet state read from the system: everything Diff
// needs, nothing it does not.
type Live struct {
	// Main is the main ruleset's dummynet list (`pfctl -s dummynet`),
	// where the hook line lives.
	Main RuleList
	// Anchor is macake's anchor (`pfctl -a ANCHOR -s dummynet`).
	Anchor RuleList
	// Info is `pfctl -s info`: whether pf is enabled.
	Info Info
	// References are the pf enable tokens (`pfctl -s References`).
	References []Reference
	// ReferenceWarnings are stray stderr lines of `pfctl -s References`.
	ReferenceWarnings []string
	// Dummynet is `dnctl list`: every pipe and queue, owned or not.
	Dummynet Dummynet
}

// Hooked reports whether the main ruleset evaluates anchor: it must hold
// `dummynet-anchor "PARENT/*"` (or the anchor itself when it has no parent).
func (l Live) Hooked(anchor string) bool {
	want := hookTarget(anchor)
	for _, r := range l.Main.Rules {
		if r.Action == "dummynet-anchor" && r.Anchor == want {
			return true
		}
	}
	return false
}

func hookTarget(anchor string) string {
	for i := len(anchor) - 1; i >= 0; i-- {
		if anchor[i] == '/' {
			return anchor[:i] + "/*"
		}
	}
	return anchor
}

// HoldsToken reports whether token is among the live pf references.
func (l Live) HoldsToken(token string) bool {
	if token == "" {
		return false
	}
	return slices.ContainsFunc(l.References, func(r Reference) bool { return r.Token == token })
}

// hookMissing is the *backend.BlockedError of a main ruleset that no
// longer evaluates macake's anchor, usually because another tool loaded its
// own main ruleset. macake never edits the main ruleset; the person must
// add the line.
func hookMissing(anchor string) *backend.BlockedError {
	line := HookLine(anchor)
	return &backend.BlockedError{
		Kind: "hook_missing",
		Problem: fmt.Sprintf("pf's main ruleset lacks the line %s, so pf would never evaluate the anchor %q "+
			"(another tool probably loaded its own main ruleset). macake never edits the main ruleset: "+
			"add this line to /etc/pf.conf after the rdr-anchor line, then reload it with `sudo pfctl -f /etc/pf.conf`:\n\n    %s\n",
			line, anchor, line),
		Detail:     fmt.Sprintf("pf's main ruleset lacks %s, so the anchor %q is never evaluated", line, anchor),
		Fix:        fmt.Sprintf("add the line %s to /etc/pf.conf after the rdr-anchor line and run: sudo pfctl -f /etc/pf.conf (macake never edits the main ruleset)", line),
		Resolved:   "pf's main ruleset evaluates the anchor again (the dummynet-anchor line is back)",
		NotApplied: "not applied: pf's main ruleset lacks the dummynet-anchor line (see 'macake status')",
		InPlace:    fmt.Sprintf("macake's objects are in place, but pf does not evaluate them: its main ruleset lacks the line %s (see below).", line),
	}
}

// CheckHook returns a *backend.BlockedError when d shapes something but the
// main ruleset would never evaluate the anchor. Tearing down (an empty d)
// needs no hook.
func CheckHook(d Desired, live Live) error {
	if len(d.Links) == 0 || live.Hooked(d.Options.Anchor) {
		return nil
	}
	return hookMissing(d.Options.Anchor)
}
