// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"math"

	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
)

// healthCheck is the reflector health cycle (autorate.md §8.1, AR-24,
// AR-25), run in RUNNING on any event except a stale response, at most once
// per HealthCheckInterval. A rotation or a comparison that replaces a slot
// ends the cycle without advancing the check clock, so the remaining steps
// run on the next event.
func (c *Controller) healthCheck(t int64) {
	if t <= c.lastCheck+c.p.checkInterval {
		return
	}
	if t > c.lastRotation+c.p.replaceInterval {
		c.lastRotation = t
		c.replace(c.rng.IntN(len(c.slots)), t, CauseRotation)
		return
	}
	if t > c.lastComparison+c.p.compareInterval {
		c.lastComparison = t
		if p, ok := c.worstSlot(); ok {
			c.replace(p, t, CauseComparison)
			return
		}
	}
	w := c.p.offenceWindow
	replaced := false
	for p := range c.slots {
		sl := &c.slots[p]
		i := p*w + c.ringPos
		if c.offences[i] {
			sl.nOffences--
		}
		off := t-sl.lastResp > c.p.deadline
		c.offences[i] = off
		if off {
			sl.nOffences++
		}
		if sl.nOffences >= c.p.offences && !replaced && c.silentSwapDue(t) {
			replaced = true
			c.replace(p, t, CauseOffences)
			c.silentSwapped(t)
		}
	}
	c.ringPos = (c.ringPos + 1) % w
	c.lastCheck = t
}

// worstSlot is the first slot, in slot order, whose baseline sum exceeds
// the best by more than BaselineSumExcess or whose delta EWMA in either
// direction exceeds the best by more than DeltaEWMAExcess (AR-24).
func (c *Controller) worstSlot() (int, bool) {
	minSum, minDown, minUp := int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64)
	for i := range c.slots {
		sl := &c.slots[i]
		minSum = min(minSum, sl.base[shape.Download]+sl.base[shape.Upload])
		minDown = min(minDown, sl.ewma[shape.Download])
		minUp = min(minUp, sl.ewma[shape.Upload])
	}
	for i := range c.slots {
		sl := &c.slots[i]
		if sl.base[shape.Download]+sl.base[shape.Upload]-minSum > c.p.sumExcess ||
			sl.ewma[shape.Download]-minDown > c.p.ewmaExcess ||
			sl.ewma[shape.Upload]-minUp > c.p.ewmaExcess {
			return i, true
		}
	}
	return 0, false
}

// replace gives slot p the first spare reflector and moves its reflector
// to the end of the pool (autorate.md §8.2, AR-25). Without a spare the slot
// keeps its reflector, but its offence ring is cleared either way.
func (c *Controller) replace(p int, t int64, cause ReplaceCause) {
	sl := &c.slots[p]
	w := c.p.offenceWindow
	clear(c.offences[p*w : (p+1)*w])
	sl.nOffences = 0
	old := sl.addr
	n := len(c.slots)
	if len(c.pool) <= n {
		c.emit(Event{Kind: EventReflectorReplaced, Slot: p, Old: old, New: old, Cause: cause})
		return
	}
	if c.cfg.RetainReflectorStats {
		c.retained[old] = sl.slotStats
	} else {
		delete(c.retained, old)
	}
	next := c.pool[n]
	c.pool[p] = next
	copy(c.pool[n:], c.pool[n+1:])
	c.pool[len(c.pool)-1] = old

	sl.addr = next
	sl.slotStats = freshStats()
	if st, ok := c.retained[next]; ok && c.cfg.RetainReflectorStats {
		sl.slotStats = st
	}
	sl.lastResp = t
	sl.responses = 0
	c.probeGen++
	c.counters.Replacements++
	c.emit(Event{Kind: EventReflectorReplaced, Slot: p, Old: old, New: next, Cause: cause})
}

// silentSwapDue reports whether a slot with offences may be replaced now:
// always, unless SilentBackoff holds the replacements back because a
// pool's worth of them went by without a response from any reflector.
func (c *Controller) silentSwapDue(t int64) bool {
	return !c.cfg.Improvements.SilentBackoff || c.silentSwaps < len(c.pool) || t >= c.silentNext
}

// silentSwapped counts a replacement for missed health checks since the
// last response and, once a pool's worth of them went unanswered, spaces
// the next one (SilentBackoff). A response resets both (Delay).
func (c *Controller) silentSwapped(t int64) {
	if !c.cfg.Improvements.SilentBackoff {
		return
	}
	c.silentSwaps++
	if c.silentSwaps < len(c.pool) {
		return
	}
	c.silentGap = min(max(2*c.silentGap, us(tuning.SilentBackoffFirst)), us(tuning.SilentBackoffMax))
	c.silentNext = t + c.silentGap
}

// silentEnded resets SilentBackoff at a response. When it had held the
// replacements back, nothing had answered because of the network, not the
// reflectors: their offences are forgiven, or every slot would be
// replaced now that they answer.
func (c *Controller) silentEnded() {
	if c.cfg.Improvements.SilentBackoff && c.silentSwaps >= len(c.pool) {
		clear(c.offences)
		for i := range c.slots {
			c.slots[i].nOffences = 0
		}
	}
	c.silentSwaps, c.silentGap = 0, 0
}
