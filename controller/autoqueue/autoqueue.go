// SPDX-License-Identifier: Apache-2.0

// Package autoqueue is the rule of `queue = "auto"` (DESIGN §2): how
// long a shaper's queue is at a rate, from the path's idle round trip
// (Bytes), and the reserve that keeps sparse packets fitting in a queue
// that takes any packet still under its limit (SparseReserve). desired
// sizes every pipe with it; the daemon resizes at each rate change; the
// simulator follows it.
package autoqueue

import (
	"time"

	"github.com/macake/macake/controller/tuning"
)

// MaxBytes is the cap of an automatic queue: 1023 KB, below
// dummynet's 1 MB byte-queue limit.
const MaxBytes = 1023 * 1024

// Target is the longest time a full automatic queue may take to
// drain at the pipe rate. DESIGN §2 left the choice between MaCake's rule
// (the bandwidth-delay product at the idle baseline) and a delay target to
// the simulator: on the trace benchmark and the built-in links, a 20 ms
// target scored better than the BDP for the fixed shaper, cake-autorate and
// macake's controller alike (docs/MEASUREMENTS.md), so auto never exceeds it.
const Target = 20 * time.Millisecond

// MinDrain is the shortest time a full automatic queue takes to
// drain at the pipe rate. A BDP measured against a nearby server (0.1 ms
// idle RTT) is a few packets, and four packets at hundreds of Mbit/s drop
// a TCP burst on every window (issue 12: 400 Mbit/s fell to 166 Mbit/s
// with 3,424 drops in 3 s). 5 ms keeps the queue a time, as the target is,
// and stays well under Target so the ceiling still decides on
// ordinary paths.
const MinDrain = 5 * time.Millisecond

// Floor is the smallest automatic queue at rateBits: whichever is
// larger of four full packets of mtu bytes (so a slow pipe still holds a
// burst) and MinDrain of drain time at the rate. A non-positive
// mtu is tuning.DefaultMTU.
func Floor(rateBits int64, mtu int) int64 {
	if mtu <= 0 {
		mtu = tuning.DefaultMTU
	}
	return max(4*int64(mtu), drainBytes(rateBits, MinDrain))
}

// drainBytes is what rateBits drains in d: rate/8 × d, computed in two
// steps so that neither overflows (rate ≤ shape.MaxRateBits, d ≤ Target).
// A non-positive rate or d gives 0.
func drainBytes(rateBits int64, d time.Duration) int64 {
	if rateBits <= 0 || d <= 0 {
		return 0
	}
	return min(rateBits, tuning.MaxRate) / 8 * int64(d/time.Microsecond) / 1_000_000
}

// Drain is the drain time an automatic queue aims at for a path
// of the given idle RTT: the RTT itself (the bandwidth-delay product), but
// no less than MinDrain and no more than Target. Two idle
// RTTs with the same Drain size the same queue at every rate.
func Drain(idleRTT time.Duration) time.Duration {
	return min(max(idleRTT, MinDrain), Target)
}

// Bytes is the pipe queue for `queue = "auto"` (DESIGN §2): the
// bandwidth-delay product at the idle baseline, rateBits/8 × idleRTT, but
// no more than Target of drain time, floored at Floor
// and capped at 1023 KB, rounded up to a whole KiB because dnctl takes the
// size in Kbytes. It is recomputed at every rate change. A non-positive
// RTT gives the floor.
func Bytes(rateBits int64, idleRTT time.Duration, mtu int) int64 {
	bdp := drainBytes(rateBits, min(idleRTT, Target))
	q := max(bdp, Floor(rateBits, mtu))
	q = (q + 1023) / 1024 * 1024
	return min(q, MaxBytes)
}

// EthernetHeader is what Linux's htb and bfifo count per packet beyond its
// IP length on an Ethernet device (a veth and an IFB alike): the 14-byte
// MAC header.
const EthernetHeader = 14

// SparseReserve makes an automatic queue of queueBytes a limit for a
// queue that takes any packet still fitting under it (Linux's bfifo): the
// queue rounded down to whole full-sized frames of mtu + EthernetHeader
// bytes (at least one), and a reserve of one such frame less a byte,
// which no full-sized frame can ever use. However full the bulk flows keep
// the queue (and CUBIC keeps any drop-tail queue full), the sparse packets
// of a call, a game or a ping still fit: in the kernel's twin of the lte
// scenario a 6 KiB bfifo lost 11 % of the pings and of the call's packets,
// and none with the reserve, at the same delay (docs/measurements/
// honest-score.md). A non-positive mtu is tuning.DefaultMTU.
func SparseReserve(queueBytes int64, mtu int) int64 {
	if mtu <= 0 {
		mtu = tuning.DefaultMTU
	}
	frame := int64(mtu) + EthernetHeader
	return max(queueBytes/frame, 1)*frame + frame - 1
}
