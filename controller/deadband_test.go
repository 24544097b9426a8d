// SPDX-License-Identifier: Apache-2.0

package controller

import "testing"

// The dead band holds back only small moves of the rate that are not
// cuts, and never a move onto a bound or base.
func TestInDeadBand(t *testing.T) {
	dp := &dirParams{minK: 1_000, baseK: 50_000, maxK: 100_000}
	for _, c := range []struct {
		name       string
		r          Reason
		rate, last int64
		want       bool
	}{
		{"small increase", ReasonIncrease, 20_090, 20_000, true},
		{"increase of exactly the band", ReasonIncrease, 20_100, 20_000, false},
		{"small decay step", ReasonDecay, 19_950, 20_000, true},
		{"small recovery", ReasonRecover, 20_050, 20_000, true},
		{"small cut is sent", ReasonCut, 19_990, 20_000, false},
		{"retry is sent", ReasonRetry, 20_010, 20_000, false},
		{"onto base", ReasonRecover, 50_000, 49_990, false},
		{"onto the maximum", ReasonIncrease, 100_000, 99_990, false},
		{"onto the minimum", ReasonDecay, 1_000, 1_001, false},
		{"nothing sent yet", ReasonIncrease, 20_000, 0, false},
	} {
		if got := inDeadBand(c.r, c.rate, c.last, dp); got != c.want {
			t.Errorf("%s: inDeadBand(%v, %d, %d) = %v, want %v", c.name, c.r, c.rate, c.last, got, c.want)
		}
	}
}
