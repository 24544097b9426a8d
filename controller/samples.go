// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"net/netip"
	"time"
)

// DelayMethod says how a delay sample was measured, which decides how the
// controller treats it (autorate.md §6).
type DelayMethod uint8

// Delay measurement methods.
const (
	// ICMPTimestamp samples carry separate one-way delays from ICMP
	// timestamps (type 13/14). They may be negative (unsynchronised clocks)
	// and jump by a day at the reflector's midnight, which the rollover
	// guard absorbs (AR-05).
	ICMPTimestamp DelayMethod = iota
	// RTTHalf samples come from echo round trips: both one-way delays are
	// ⌊RTT/2⌋ and the upload statistics are copies of the download ones (AR-02).
	RTTHalf
	// OneWay samples carry one-way delays from a synchronised method such
	// as irtt; no rollover guard.
	OneWay
)

// DelaySample is one reflector response: one one-way-delay sample for each
// direction.
type DelaySample struct {
	// Reflector is the address that answered.
	Reflector netip.Addr
	// At is the receive time of the response, from the same clock as the
	// `now` passed to the controller.
	At time.Time
	// DownOWD and UpOWD are the one-way delays. For RTTHalf both are ⌊RTT/2⌋.
	DownOWD, UpOWD time.Duration
	// Method is how they were measured; the zero value is ICMPTimestamp.
	Method DelayMethod
}

// RTTSample builds the sample of an echo reply (AR-02): both one-way
// delays are ⌊RTT_µs / 2⌋ µs.
func RTTSample(reflector netip.Addr, at time.Time, rtt time.Duration) DelaySample {
	half := usDuration(us(rtt) / 2)
	if rtt < 0 {
		half = rtt // kept negative so the controller rejects it
	}
	return DelaySample{Reflector: reflector, At: at, DownOWD: half, UpOWD: half, Method: RTTHalf}
}

// LoadSample is one read of the shaped interface's cumulative counters:
// received bytes and packets are the download direction, transmitted ones
// the upload direction. Counters may wrap at 32 bits or reset; the
// controller handles both (see Controller.Load).
type LoadSample struct {
	// At is when the counters were read.
	At time.Time
	// RxBytes and TxBytes are cumulative byte counters.
	RxBytes, TxBytes uint64
	// RxPackets and TxPackets are cumulative packet counters, used for the
	// overhead compensation; zero when unknown.
	RxPackets, TxPackets uint64
}
