// SPDX-License-Identifier: Apache-2.0

package controller

import "time"

// Queue sizing bounds for AutoQueueBytes.
const (
	// MaxAutoQueueBytes is the cap of an automatic queue: 1023 KB, below
	// dummynet's 1 MB byte-queue limit.
	MaxAutoQueueBytes = 1023 * 1024
	// DefaultMTU is used when the interface MTU is unknown (≤ 0).
	DefaultMTU = 1500
)

// AutoQueueTarget is the longest time a full automatic queue may take to
// drain at the pipe rate. DESIGN §2 left the choice between MaCake's rule
// (the bandwidth-delay product at the idle baseline) and a delay target to
// the simulator: on the trace benchmark and the built-in links, a 20 ms
// target scored better than the BDP for the fixed shaper, cake-autorate and
// macake's controller alike (docs/MEASUREMENTS.md), so auto never exceeds it.
const AutoQueueTarget = 20 * time.Millisecond

// AutoQueueBytes is the pipe queue for `queue = "auto"` (DESIGN §2): the
// bandwidth-delay product at the idle baseline, rateBits/8 × idleRTT, but
// no more than AutoQueueTarget of drain time, floored at 4 × MTU and
// capped at 1023 KB, rounded up to a whole KiB because dnctl takes the
// size in Kbytes. It is recomputed at every rate change. A non-positive
// rate or RTT gives the floor.
func AutoQueueBytes(rateBits int64, idleRTT time.Duration, mtu int) int64 {
	if mtu <= 0 {
		mtu = DefaultMTU
	}
	floor := 4 * int64(mtu)
	var bdp int64
	if rateBits > 0 && idleRTT > 0 {
		// bits/s × ns / (8 × 10⁹) in two steps so that neither overflows:
		// rate ≤ 1 Tbit/s and RTT ≤ 1 min stay far inside int64.
		rate := min(rateBits, MaxRate)
		rtt := min(idleRTT, AutoQueueTarget)
		bdp = rate / 8 * int64(rtt/time.Microsecond) / 1_000_000
	}
	q := max(bdp, floor)
	q = (q + 1023) / 1024 * 1024
	return min(q, MaxAutoQueueBytes)
}
