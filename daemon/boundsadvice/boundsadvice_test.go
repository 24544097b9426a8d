// SPDX-License-Identifier: Apache-2.0

package boundsadvice

import (
	"math"
	"testing"

	"github.com/macake/macake/config/units"
)

// TestSuggestedBounds: a suggestion is rounded to two figures (up for a
// max, down for a min), and a lowered min is below what the link carried
// at it and at least a quarter lower, never under the least rate.
func TestSuggestedBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  int64
		want int64
	}{
		{"two figures up", twoFigures(137_000_000, math.Ceil), 140_000_000},
		{"two figures down", twoFigures(137_000_000, math.Floor), 130_000_000},
		{"a gigabit and more", twoFigures(1_410_000_000, math.Ceil), 1_500_000_000},
		{"below a hundred, as it is", twoFigures(57, math.Ceil), 57},
		{"min, from what it carried", loweredMin(50_000_000, 30_000_000), 27_000_000},
		{"min, a quarter lower", loweredMin(50_000_000, 49_000_000), 37_000_000},
		{"min, never under the least rate", loweredMin(int64(units.MinRate), 1), int64(units.MinRate)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
