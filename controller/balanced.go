// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
)

// balance runs balanced mode's engage/release logic on a processed
// response (after the window update and, when engaged, the rate law).
//
// A standing queue is a run of consecutive processed responses on which
// either direction flags bufferbloat (the same N-of-W vote that triggers a
// cut). When it has lasted EngageAfter the shaper engages at the rate it
// last had (initially the start rate) with fresh refractory timers, as at
// start-up. The reported delay is the mean, over the run, of the worse
// direction's window average.
//
// Latency is clean on a response when neither direction flags bufferbloat
// and no direction is held under high load below its maximum: releasing a
// shaper that is what keeps a saturated link clean would only rebuild the
// queue. After ReleaseAfter of clean responses the shaper is released.
func (c *Controller) balance(t int64) {
	dn, up := &c.dir[shape.Download], &c.dir[shape.Upload]
	bloat := dn.bloat || up.bloat
	if !c.engaged {
		if !bloat {
			c.queueOn = false
			return
		}
		if !c.queueOn {
			c.queueOn, c.queueSince, c.queueSum, c.queueN = true, t, 0, 0
		}
		c.queueSum += max(dn.avg, up.avg)
		c.queueN++
		if t-c.queueSince >= c.p.engageAfter {
			c.engage(t)
		}
		return
	}
	clean := !bloat && c.unconstrained(shape.Download) && c.unconstrained(shape.Upload)
	if !clean {
		c.cleanOn = false
		return
	}
	if !c.cleanOn {
		c.cleanOn, c.cleanSince = true, t
	}
	if t-c.cleanSince >= c.p.releaseAfter {
		c.release(t)
	}
}

// unconstrained reports whether direction d does not need its shaper: its
// load is not high, or it already runs at its maximum.
func (c *Controller) unconstrained(d shape.Direction) bool {
	ds, dp := &c.dir[d], &c.p.dir[d]
	return ds.class != LoadHigh || ds.rate >= dp.maxK || dp.monitorOnly
}

func (c *Controller) engage(t int64) {
	c.engaged = true
	c.queueOn, c.cleanOn = false, false
	for d := range c.dir {
		ds := &c.dir[d]
		ds.tCut, ds.tDecay = t, t
		ds.lastApplied, ds.confirmed = 0, 0
	}
	c.emit(Event{Kind: EventEngage, Duration: usDuration(t - c.queueSince), Delay: usDuration(c.queueSum / max(c.queueN, 1))})
	c.apply([2]Reason{ReasonEngage, ReasonEngage})
}

func (c *Controller) release(t int64) {
	c.engaged = false
	c.cleanOn, c.queueOn = false, false
	for d := range c.dir {
		c.dir[d].lastApplied, c.dir[d].confirmed = 0, 0
	}
	c.emit(Event{Kind: EventRelease, Duration: usDuration(t - c.cleanSince)})
}

// Engaged reports whether the shaper is in place: always in autorate and
// fixed mode, never in off mode, and between engage and release in
// balanced mode.
func (c *Controller) Engaged() bool {
	switch c.cfg.Mode {
	case tuning.ModeAutorate, tuning.ModeFixed:
		return true
	case tuning.ModeBalanced:
		return c.engaged
	}
	return false
}
