// SPDX-License-Identifier: Apache-2.0

package english

import "testing"

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n          int
		noun, want string
	}{
		{1, "change", "1 change"}, {0, "change", "0 changes"}, {2, "policy", "2 policies"},
		{3, "day", "3 days"}, {2, "configuration problem", "2 configuration problems"},
	} {
		if got := Plural(tc.n, tc.noun); got != tc.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}

func TestJoin(t *testing.T) {
	if got := Join([]string{"1", "2", "3", "4"}, 3); got != "1, 2, 3 and 1 more" {
		t.Errorf("Join cut = %q", got)
	}
	if got := Join([]string{"1", "2"}, 3); got != "1, 2" {
		t.Errorf("Join = %q", got)
	}
}
