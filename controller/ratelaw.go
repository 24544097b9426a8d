// SPDX-License-Identifier: Apache-2.0

package controller

// The integer rules of autorate.md §5.9. Every division truncates toward
// zero, which is Go's int64 `/`, so these reproduce upstream to the unit.

// ewma is one step of an EWMA with weight alpha in ppm:
// trunc((a·x + (10⁶ − a)·prev) / 10⁶).
func ewma(alphaPPM, x, prev int64) int64 {
	return (alphaPPM*x + (1_000_000-alphaPPM)*prev) / 1_000_000
}

// baselineStep updates a baseline B with a new one-way delay (AR-03): the
// increase alpha when owd ≥ B, else the decrease alpha. It returns the new
// baseline and the delta owd − B against it.
func baselineStep(up, down, owd, b int64) (newB, delta int64) {
	a := down
	if owd >= b {
		a = up
	}
	newB = ewma(a, owd, b)
	return newB, owd - newB
}

// cutGrade is x in thousandths (AR-11): how far the window average sits
// between the delay threshold (0) and the full-cut threshold (1000).
func cutGrade(avg, tDelay, tDown int64) int64 {
	if tDown <= tDelay {
		return 1000
	}
	if avg <= tDelay {
		return 0
	}
	return min(1000, 1000*(avg-tDelay)/(tDown-tDelay))
}

// increaseGrade is y in thousandths (AR-13): 1000 at or below the
// full-increase threshold, 0 at or above the delay threshold.
func increaseGrade(avg, tDelay, tUp int64) int64 {
	if tDelay <= tUp {
		return 1000
	}
	if avg >= tDelay {
		return 0
	}
	return min(1000, 1000*(tDelay-avg)/(tDelay-tUp))
}

// cutRate applies the graded cut (AR-11, AR-12): m = 1000·F_min − x·(F_min − F_max)
// ppm, S ← trunc(S·m / 10⁶).
func cutRate(s, x, fMin, fMax int64) int64 {
	m := 1000*fMin - x*(fMin-fMax)
	return s * m / 1_000_000
}

// increaseRate applies the graded increase (AR-13): g = 1000·F_min − y·(F_min − F_max)
// ppm with F_max > F_min, S ← trunc(S·g / 10⁶).
func increaseRate(s, y, fMin, fMax int64) int64 {
	g := 1000*fMin - y*(fMin-fMax)
	return s * g / 1_000_000
}

// decayRate moves S toward base by one step (AR-16), snapping to base.
func decayRate(s, base, fDecay, fRecover int64) int64 {
	switch {
	case s > base:
		return max(base, s*fDecay/1000)
	case s < base:
		return min(base, s*fRecover/1000)
	}
	return s
}

// achievedRate is the achieved rate in kbit/s from a byte delta over an
// interval in µs (AR-08): max(0, trunc(8000 · Δbytes / interval_µs)).
func achievedRate(deltaBytes, intervalUS int64) int64 {
	if intervalUS <= 0 || deltaBytes <= 0 {
		return 0
	}
	return 8000 * deltaBytes / intervalUS
}

// loadPercent is trunc(100 · A / S) (AR-09).
func loadPercent(a, s int64) int64 {
	if s <= 0 {
		return 0
	}
	return 100 * a / s
}
