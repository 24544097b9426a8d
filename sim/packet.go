// SPDX-License-Identifier: Apache-2.0

package sim

// Packet sizes on the wire, in IP bytes (what dummynet and the interface
// counters count; link-layer framing is left out throughout).
const (
	dataBytes    = 1500 // a full-sized TCP segment
	mssBytes     = 1448 // its payload: 1500 − 20 (IP) − 32 (TCP with timestamps)
	ackBytes     = 52   // IP + TCP with timestamps
	sackAckBytes = 64   // the same with one SACK block
	probeBytes   = 84   // ICMP echo: IP 20 + ICMP 8 + 56 bytes payload
	// CallBytes is one packet of the interactive call: IP 20 + UDP 8 +
	// RTP 12 + 160 bytes of G.711 audio (20 ms of it).
	CallBytes = 200
)

// ethernetFraming is what Linux counts per packet beyond the IP packet on
// an Ethernet (or veth, or IFB) device: the 14-byte MAC header. htb's rate
// and bfifo's limit count it; dummynet, hooked at the IP layer by pf, does
// not. It decides whether a small packet still fits in a nearly full bfifo
// (four 1514-byte frames in a 6 KiB queue leave 88 bytes: a 58-byte probe
// frame fits, a 98-byte ping does not).
const ethernetFraming = 14

type packetKind uint8

const (
	kindData    packetKind = iota // TCP segment of a bulk flow
	kindAck                       // TCP acknowledgement
	kindProbe                     // controller probe to a reflector (exempt from the pipes)
	kindMeasure                   // the independent measurement probe (not exempt)
	kindCall                      // a packet of the interactive call (not exempt)
)

// packet is one IP packet in flight. It is a value: queues copy it.
type packet struct {
	kind  packetKind
	reply bool  // probes: the echo reply on its way back
	size  int32 // bytes on the wire
	flow  int32 // data/ack: flow index; probe: reflector index
	seq   int32 // data: segment number; ack: cumulative ack (next expected); probe, call: sequence
	sack  int32 // ack: the segment above the cumulative ack that triggered it, or -1

	sent int64 // data: transmission time (echoed by the ack); probe, call: send time
	echo int64 // ack: the echoed transmission time; probe: time at the far end
	base int64 // measurement probe, call: sum of the propagation delays it met (true base delay)
	aux  int64 // measurement probe: added delay of the upward leg
	left int32 // bytes still to be served at the bottleneck (partial service)
	// served is when the bottleneck finished serving the packet: U counts
	// a delivered packet in that bin, so that the bits a window counts are
	// bits its capacity carried.
	served int64
}
