// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"math"
	"time"

	"github.com/macake/macake/shape"
)

// counterStep is how a cumulative counter moved between two reads.
type counterStep uint8

const (
	counterForward counterStep = iota
	counterWrapped             // went backwards across a 32-bit wrap
	counterReset               // went backwards (or jumped absurdly): re-baseline
)

// counterDelta returns the advance of a cumulative counter (darwin-and-
// linux.md §3.6): forward is new − old; backwards from a value that fits
// in 32 bits is a 32-bit wrap when the implied advance is at most
// plausible; anything else, and any advance above maxCounterStep, is a
// reset.
func counterDelta(old, new, plausible uint64) (uint64, counterStep) {
	if new >= old {
		d := new - old
		if d > maxCounterStep {
			return 0, counterReset
		}
		return d, counterForward
	}
	if old <= math.MaxUint32 {
		d := new + (1 << 32) - old
		if d <= plausible {
			return d, counterWrapped
		}
	}
	return 0, counterReset
}

// Load processes one read of the interface counters, handled at now
// (autorate.md §5.1, §5.2). The first sample only records the counters.
// A sample that is not newer than the previous one, or is stamped after
// now, is dropped (the counters keep their previous reference) and
// treated like a tick.
//
// A counter that went backwards is a 32-bit wrap when the previous value
// fits in 32 bits and the wrapped advance is plausible (at most 4 × the
// larger maximum rate, and at least 1 Gbit/s, over the interval); otherwise it
// is a reset: upstream reports 0 kbit/s for that direction, or with
// Improvements.DropCounterResets the whole sample is skipped. Either way
// the counters are re-baselined.
func (c *Controller) Load(now time.Time, s LoadSample) Output {
	t := c.begin(now)
	if s.At.IsZero() {
		c.counters.RejectedLoadSamples++
		c.nonResponse(t)
		return c.out
	}
	at := c.micros(s.At)
	if at > t || (c.havePrev && at <= c.prevAt) {
		c.counters.RejectedLoadSamples++
		c.nonResponse(t)
		return c.out
	}
	if !c.havePrev {
		c.havePrev, c.prevAt, c.prev = true, at, s
		c.nonResponse(t)
		return c.out
	}

	// The divisor is the nominal interval (upstream, AR-08; the first rate
	// uses the unfloored one), or the measured time between the reads.
	interval := c.p.monitorFloored
	if !c.rateDone {
		interval = c.p.monitorNominal
	}
	if c.cfg.Improvements.MeasuredInterval {
		interval = at - c.prevAt
	}
	plausible := uint64(c.wrapPlausible) * uint64(max(interval, 1)) / 8000
	prev := c.prev
	c.havePrev, c.prevAt, c.prev = true, at, s

	type pair struct{ bytes, pkts, oldBytes, oldPkts uint64 }
	var counters [2]pair
	counters[shape.Download] = pair{s.RxBytes, s.RxPackets, prev.RxBytes, prev.RxPackets}
	counters[shape.Upload] = pair{s.TxBytes, s.TxPackets, prev.TxBytes, prev.TxPackets}

	var bytes, pkts [2]int64
	var reset [2]bool
	for d, cp := range counters {
		b, step := counterDelta(cp.oldBytes, cp.bytes, plausible)
		switch step {
		case counterWrapped:
			c.counters.CounterWraps++
		case counterReset:
			c.counters.CounterResets++
			reset[d] = true
		}
		bytes[d] = int64(b)
		// Packets are only believed when the bytes are and there are no
		// more packets than bytes.
		if n, pstep := counterDelta(cp.oldPkts, cp.pkts, b); pstep != counterReset && !reset[d] && n <= b {
			pkts[d] = int64(n)
		}
	}
	if (reset[0] || reset[1]) && c.cfg.Improvements.DropCounterResets {
		c.nonResponse(t)
		return c.out
	}

	c.counters.LoadSamples++
	c.rateDone = true
	for d := range c.dir {
		ds := &c.dir[d]
		ds.prevAch = ds.achieved
		if reset[d] {
			ds.achieved = 0 // upstream: a negative Δ gives 0
		} else {
			ds.achieved = achievedRate(c.p.framing.WireBytes(bytes[d], pkts[d]), interval)
			c.observePackets(ds, bytes[d], pkts[d])
		}
		ds.fresh = true
		ds.loadPct = loadPercent(ds.achieved, ds.rate)
		ds.class = c.classify(ds)
		if ds.class == LoadHigh {
			ds.highAt = at
		}
	}

	switch c.run {
	case running:
		c.nonResponse(t)
	case sleeping:
		c.wakeTest(t)
	case stalled:
		if c.dir[0].achieved > c.p.stallK && c.dir[1].achieved > c.p.stallK {
			c.run = running
			c.emit(Event{Kind: EventStallEnd, Down: c.dir[shape.Download].achieved * 1000, Up: c.dir[shape.Upload].achieved * 1000})
			return c.out
		}
		c.globalTimeout(t)
	}
	return c.out
}

// classify is the load class (AR-09): high above the high-load percent,
// else low above the connection-active rate, else idle.
func (c *Controller) classify(ds *dirState) LoadClass {
	switch {
	case ds.loadPct > c.p.highLoadPct:
		return LoadHigh
	case ds.achieved > c.p.activeK:
		return LoadLow
	}
	return LoadIdle
}

// observePackets folds one sample into the decaying byte and wire-byte
// sums (each sample's weight halves about every 5 samples, ~1 s at 200 ms)
// and updates the pipe-rate ratio. Bulk traffic dominates the sums, which
// is when the ratio matters: the pipe only limits under load.
func (c *Controller) observePackets(ds *dirState, bytes, pkts int64) {
	if !c.p.compensate || pkts <= 0 || bytes <= 0 {
		return
	}
	ds.bytesSum += bytes - ds.bytesSum/8
	ds.wireSum += c.p.framing.WireBytes(bytes, pkts) - ds.wireSum/8
	if ds.wireSum > 0 {
		// A ratio of two integers; one division and one multiply, so the
		// result is identical on every platform.
		ds.ratio = max(1, min(shape.ShareOne, int64(float64(ds.bytesSum)/float64(ds.wireSum)*shape.ShareOne)))
	}
}
