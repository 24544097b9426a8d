// SPDX-License-Identifier: Apache-2.0

package controller

// macake's deviations that act on capacity evidence: what the byte
// counters say the link carried when the delay rose (CutToAchieved's
// achieved rate), and what the pipe carried with a clean window. None of
// this runs with every improvement off (faithful mode).

// Timings of the evidence-based improvements, µs.
const (
	// plateauRamp is how long after reaching the plateau (PlateauHold)
	// increases take to grow back to upstream's full step: growth is
	// scaled by (τ/plateauRamp)², so probing above a capacity the link has
	// just shown is rare at first and quickens the longer it stays clean.
	plateauRamp = 3_000_000
	// evidenceLifetime is how long a capacity the link has shown is
	// believed: the plateau's capacity and the recent peak expire after
	// it, and the controller probes as upstream does.
	evidenceLifetime = 30_000_000
	// outageHoldMax bounds OutageHold: a link delivering almost nothing
	// for longer than this has a low capacity, not an outage.
	outageHoldMax = 5_000_000
	// spareMax bounds DirectionalCut: bufferbloat that lasts this long
	// while a direction is spared cuts it too (the blame was wrong).
	spareMax = 1_000_000
)

// Shares of the evidence-based improvements, thousandths.
const (
	// plateauShare is where PlateauHold holds the rate: this share of the
	// capacity the link showed at the last cut.
	plateauShare = 950
	// peakShare: PeakRecovery accelerates while the rate is below this
	// share of the recent peak.
	peakShare = 900
	// outageShare: a link delivering less than this share of the rate
	// is in an outage (benchmark.md §7.3's definition, a tenth).
	outageShare = 100
	// pipeLimitedShare: a direction whose link delivered at least this
	// share of its rate was held back by its own pipe, so the queue that
	// raised the delay is not its link's (DirectionalCut).
	pipeLimitedShare = 950
	// maxAcceleratedStep bounds one PeakRecovery increase: ×1.25.
	maxAcceleratedStep = 1250
	// drainFloor bounds DrainCut: never below half the achieved rate.
	drainFloor = 500
)

// drainTime is the time DrainCut aims to clear a standing queue in, µs.
const drainTime = 1_000_000

// drainShare is DrainCut's share of the achieved rate for a window
// average delay of avg µs: a queue of avg at the link's rate drains in
// drainTime when the pipe admits 1 − avg/drainTime of that rate (the ISP
// serves the rest from its backlog), between drainFloor and AchievedCut.
func (c *Controller) drainShare(avg int64) int64 {
	share := 1000 - 1000*max(avg, 0)/drainTime
	return max(drainFloor, min(c.p.achievedCut, share))
}

// evidence is what the counters showed the link can carry, for one
// direction; all rates kbit/s, times µs since the start.
type evidence struct {
	capacity   int64 // achieved rate when the delay rose (the last achieved cut); 0 = none
	capacityAt int64
	plateauAt  int64 // when the rate first reached the plateau after that cut; -1 = not yet
	peak       int64 // the highest capacity shown recently (cut evidence, or a clean saturated pipe)
	peakAt     int64
	cleanRun   int   // consecutive increases with a clean window (PeakRecovery)
	outageAt   int64 // start of the current outage; -1 = none
	spareAt    int64 // start of the current sparing (DirectionalCut); -1 = none
}

func newEvidence() evidence { return evidence{plateauAt: -1, outageAt: -1, spareAt: -1} }

// shown is the larger of the last two achieved-rate samples: a single
// 200 ms dip of a bursty radio link does not count as the link's capacity.
func (ds *dirState) shown() int64 { return max(ds.achieved, ds.prevAch) }

// noteCut records the achieved rate a at an achieved cut as the link's
// capacity.
func (c *Controller) noteCut(ds *dirState, a, t int64) {
	ev := &ds.ev
	ev.capacity, ev.capacityAt, ev.plateauAt = a, t, -1
	ev.cleanRun = 0
	c.notePeak(ds, a, t)
}

// notePeak raises the recent peak to v, or restarts it at v once it has
// expired.
func (c *Controller) notePeak(ds *dirState, v, t int64) {
	ev := &ds.ev
	if v >= ev.peak || t-ev.peakAt > evidenceLifetime {
		ev.peak, ev.peakAt = v, t
	}
}

// saturating reports whether the direction filled its pipe within the
// last second (CutToAchieved's condition).
func (ds *dirState) saturating(t int64) bool {
	return ds.highAt >= 0 && t-ds.highAt <= saturatingRecently
}

// inOutage reports whether OutageHold keeps direction ds's rate: it was
// saturating when the link stopped delivering (less than a tenth of the
// rate), and has not been in that state for longer than outageHoldMax.
func (c *Controller) inOutage(ds *dirState, t int64) bool {
	if !c.cfg.Improvements.OutageHold {
		return false
	}
	ev := &ds.ev
	if ds.shown()*1000 >= ds.rate*outageShare {
		ev.outageAt = -1
		return false
	}
	if ev.outageAt < 0 {
		if !ds.saturating(t) {
			return false
		}
		ev.outageAt = t
	}
	return t-ev.outageAt <= outageHoldMax
}

// spared reports the directions DirectionalCut keeps out of a bufferbloat
// cut. An echo probe sees one round trip, so both directions vote alike;
// the counters tell which link is full: a saturating direction whose link
// delivered less than its pipe allowed (pipeLimitedShare) holds the
// queue. When such a direction exists, only it is cut; when every
// saturating direction was held back by its own pipe, the saturating ones
// are cut (the queue is somebody's, and they are what fills links); a
// direction that is not saturating is never cut while another is. With no
// direction saturating, both are cut, as upstream does. A spared direction
// holds its rate; sparing that lasts spareMax ends.
func (c *Controller) spared(t int64) (spare [2]bool) {
	if !c.cfg.Improvements.DirectionalCut {
		return spare
	}
	var sat, full [2]bool
	suspect, anySat := false, false
	for d := range c.dir {
		ds := &c.dir[d]
		sat[d] = ds.saturating(t) && !c.p.dir[d].monitorOnly
		full[d] = sat[d] && ds.shown()*1000 < ds.rate*pipeLimitedShare
		suspect = suspect || full[d]
		anySat = anySat || sat[d]
	}
	for d := range c.dir {
		ds := &c.dir[d]
		switch {
		case suspect:
			spare[d] = !full[d]
		case anySat:
			spare[d] = !sat[d]
		}
		if !spare[d] || !ds.bloat {
			ds.ev.spareAt = -1
			spare[d] = false
			continue
		}
		if ds.ev.spareAt < 0 {
			ds.ev.spareAt = t
		}
		if t-ds.ev.spareAt > spareMax {
			spare[d] = false
		}
	}
	return spare
}

// shapeIncrease adjusts one high-load increase from old to up (upstream's
// graded step) with the evidence-based improvements, and returns the new
// rate. PeakRecovery: below a capacity the link showed recently, with a
// clean window, each increase in a row is larger than the last (×1.04,
// ×1.04, ×1.08, … up to ×1.25), up to that capacity; a long dip then
// recovers in about two seconds instead of upstream's six. PlateauHold:
// after an achieved cut, a clean window climbs halfway back to
// plateauShare of the capacity the cut saw at once, and from there on the
// step grows from nothing back to upstream's over plateauRamp, so a
// steady link is probed above its capacity rarely instead of every
// second or two.
func (c *Controller) shapeIncrease(ds *dirState, old, up, t int64) int64 {
	ev := &ds.ev
	clean := ds.nDelayed == 0
	imp := c.cfg.Improvements
	if clean {
		ev.cleanRun++
		c.notePeak(ds, old, t)
	} else {
		ev.cleanRun = 0
	}
	if imp.PeakRecovery && clean && t-ev.peakAt <= evidenceLifetime && old*1000 < ev.peak*peakShare {
		step := up - old
		n := min(ev.cleanRun/2, 3) // ×1, ×1, ×2, ×2, ×4, ×4, ×8 …
		accel := old + step<<n
		accel = min(accel, old*maxAcceleratedStep/1000, ev.peak*peakShare/1000)
		return max(up, accel)
	}
	if imp.PlateauHold && ev.capacity > 0 && t-ev.capacityAt <= evidenceLifetime {
		target := ev.capacity * plateauShare / 1000
		if old < target {
			if clean {
				up = max(up, old+(target-old)/2)
			}
			return min(up, target)
		}
		if ev.plateauAt < 0 {
			ev.plateauAt = t
		}
		tau := min(t-ev.plateauAt, plateauRamp)
		// (τ/ramp)² in millionths, then the step scaled by it.
		s := tau * 1000 / plateauRamp
		return old + (up-old)*s*s/1_000_000
	}
	return up
}
