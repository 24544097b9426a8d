// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math/rand/v2"
	"sync"
	"time"
)

// The gentle RED of a dummynet pipe whose queue is in bytes, as the macOS
// kernel computes it (QueueRule.RED): `dnctl pipe N config bw … queue
// NKbytes gred w_q/min_th/max_th/max_p`. The kernel keeps the average
// queue and the thresholds in 32-bit fixed point with 16 fractional bits
// and derives the slopes by integer division, so what it does differs
// from RED on paper in three ways the twin must reproduce, or it credits
// gred with early drops a Mac never makes:
//
//   - the thresholds and the queue are in bytes, shifted left by 16 bits
//     into a 32-bit int: from 32 KiB up they wrap, and the average with
//     them;
//   - the linear slope max_p/(max_th−min_th) is an integer division of
//     the scaled max_p by a span in bytes: it is zero once the span
//     exceeds max_p × 65536 bytes (6,553 bytes at max_p 0.1); above
//     max_th the gentle slope (1−max_p)/max_th truncates too, though
//     never to zero on the queues gred is given here;
//   - a packet's probability is scaled by its length over the largest
//     packet (1500 bytes), and drops are spread by counting the packets
//     since the last one against a 16-bit random draw.
//
// When a packet finds the queue empty, the kernel means to decay the
// average by (1−w_q) per idle millisecond (the lookup step at any rate
// above a few hundred kbit/s), to zero after a table of 256 steps; but it
// multiplies in unsigned 32 bits, which wraps for any average of a byte
// or more, so in effect the average restarts from under a byte each time
// the queue drains.
const (
	redScale      = 16 // fractional bits
	redWQ         = 0.02
	redMaxP       = 0.1
	redMaxPacket  = 1500 // the largest packet, by which a packet's probability is scaled
	redLookupSize = 256  // idle steps the decay table holds
	// redMaxQueue is the largest byte queue gred is configured on: the
	// kernel's scaled queue wraps at 32 KiB, and a dummynet queue runs up
	// to a packet past its limit, so a backend must keep gred off larger
	// queues (droptail there), and the twin does the same.
	redMaxQueue = 30 << 10
)

// gred is one pipe's RED state and the parameters last configured.
type gred struct {
	rng *rand.Rand
	// limit is the queue limit the thresholds were derived from.
	limit int64
	// wq, maxP, minTh, maxTh, c1..c4: the kernel's fixed-point values.
	wq, maxP, minTh, maxTh, c1, c2, c3, c4 int32
	// avg is the average queue (scaled), count the packets since the last
	// drop (-1: below min_th), random the draw they are held against.
	avg, count, random int32
	// emptyAt is when the queue last became empty, in ns of the run.
	emptyAt int64
}

// redScaled is x in 16.16 fixed point in a 32-bit int, wrapping as the
// kernel's int does.
func redScaled(x int64) int32 { return int32(uint32(x) << redScale) }

// redFixed is a fraction as dnctl passes it to the kernel: truncated to
// 16 fractional bits.
func redFixed(x float64) int32 { return int32(x * (1 << redScale)) }

// redMul is the kernel's SCALE_MUL: a product of two fixed-point values.
func redMul(a, b int64) int64 { return (a * b) >> redScale }

// redDecay is the kernel's idle table: entry t is (1−w_q)^(t+1) in
// unsigned 16.16 fixed point, each from the one before (no entry wraps).
// Built once, at the first idle gap, not at every start of the binary.
var redDecay = sync.OnceValue(func() (table [redLookupSize]uint32) {
	step := uint32(1)<<redScale - uint32(redFixed(redWQ))
	table[0] = step
	for t := 1; t < redLookupSize; t++ {
		table[t] = (table[t-1] * step) >> redScale
	}
	return table
})

// configure sets the thresholds a daemon would give dnctl for a queue of
// limit bytes: min_th a fifth of it, max_th three fifths; above
// redMaxQueue it turns gred off (on reports whether it is on).
func (g *gred) configure(limit int64) (on bool) {
	if limit > redMaxQueue {
		return false // droptail: the kernel leaves the average as it was
	}
	if limit == g.limit {
		return true
	}
	g.limit = limit
	minTh, maxTh := limit/5, 3*limit/5
	if maxTh <= minTh {
		maxTh = minTh + 1
	}
	g.wq, g.maxP = redFixed(redWQ), redFixed(redMaxP)
	g.minTh, g.maxTh = redScaled(minTh), redScaled(maxTh)
	g.c1 = int32(int64(g.maxP) / (maxTh - minTh))
	g.c2 = int32(redMul(int64(g.c1), int64(redScaled(minTh))))
	g.c3 = int32((int64(1)<<redScale - int64(g.maxP)) / maxTh)
	g.c4 = int32(int64(1)<<redScale - 2*int64(g.maxP))
	return true
}

// emptied notes that the queue became empty at now.
func (g *gred) emptied(now int64) { g.emptyAt = now }

// drop is the kernel's test for a packet of size bytes arriving at a
// queue of queued bytes at now (the queue's limit already checked).
func (g *gred) drop(queued, size, now int64) bool {
	if queued != 0 {
		diff := redScaled(queued) - g.avg
		g.avg += int32(redMul(int64(diff), int64(g.wq)))
	} else if g.avg != 0 {
		t := (now - g.emptyAt) / int64(time.Millisecond)
		if t < 0 || t >= redLookupSize {
			g.avg = 0
		} else {
			// The kernel multiplies the average by the table's entry in
			// unsigned 32 bits, with no wider cast, so the product wraps
			// and the average comes out under one byte.
			g.avg = int32((uint32(g.avg) * redDecay()[t]) >> redScale)
		}
	}
	if g.avg < g.minTh {
		g.count = -1
		return false
	}
	var pb int64
	if g.avg >= g.maxTh {
		pb = redMul(int64(g.c3), int64(g.avg)) - int64(g.c4)
	} else if g.avg > g.minTh {
		pb = redMul(int64(g.c1), int64(g.avg)) - int64(g.c2)
	}
	pb = pb * size / redMaxPacket
	if g.count++; g.count == 0 {
		g.random = int32(g.rng.Uint32() & 0xffff)
		return false
	}
	if redMul(pb, int64(g.count)<<redScale) > int64(g.random) {
		g.count = 0
		g.random = int32(g.rng.Uint32() & 0xffff)
		return true
	}
	return false
}
