// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"slices"
	"strings"
	"testing"
)

// TestLineDiff: a rules update shows the rules that go and come, in order,
// and nothing the two sides share.
func TestLineDiff(t *testing.T) {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, " ")
	}
	for _, c := range []struct {
		have, want string
		limit      int
		diff       []string
	}{
		{"a b c", "a b c", 12, nil},
		{"a b c", "a x c", 12, []string{"- b", "+ x"}},
		{"a b c d", "a c d", 12, []string{"- b"}},
		{"a c", "a b c", 12, []string{"+ b"}},
		// A reflector swapped: both of its rules change, the pipes stay.
		{"to9 from9 out in", "to8 from8 out in", 12, []string{"- to9", "- from9", "+ to8", "+ from8"}},
		// A moved rule is gone and come: pf's rule order matters.
		{"a b c", "c a b", 12, []string{"+ c", "- c"}},
		{"a b c d e", "v w x y z", 3, []string{"- a", "- b", "- c", "… 7 more"}},
	} {
		got := lineDiff(split(c.have), split(c.want), c.limit)
		if !slices.Equal(got, c.diff) {
			t.Errorf("lineDiff(%q, %q) = %q, want %q", c.have, c.want, got, c.diff)
		}
	}
}
