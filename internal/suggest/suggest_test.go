// SPDX-License-Identifier: Apache-2.0

package suggest

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"apply", "plan", "status", "validate", "interface", "overhead"}
	for _, tc := range []struct{ in, want string }{
		{"aply", "apply"},
		{"stauts", "status"}, // neighbours swapped
		{"intreface", "interface"},
		{"OVERHED", "overhead"}, // case does not count
		{"frobnicate", ""},      // too far from everything
		{"x", ""},
	} {
		if got := Closest(tc.in, names); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
