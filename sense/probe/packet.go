// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// ICMP type numbers used here. ICMP timestamps exist only in ICMPv4.
const (
	typeEchoReply4      = 0
	typeDstUnreach4     = 3
	typeEcho4           = 8
	typeTimeExceeded4   = 11
	typeTimestamp4      = 13
	typeTimestampReply4 = 14

	typeDstUnreach6   = 1
	typeTimeExceeded6 = 3
	typeEcho6         = 128
	typeEchoReply6    = 129
)

// payloadMagic starts every echo payload macake sends, so a packet capture
// shows whose probe it is.
var payloadMagic = [4]byte{'m', 'c', 'k', '1'}

// payloadLen is magic (4) + nonce (8) + extended sequence number (4).
const payloadLen = 16

// msPerDay is where ICMP timestamps (milliseconds since midnight UTC) wrap.
const msPerDay = 86_400_000

// nonstandardBit is set by a host whose timestamp is not milliseconds since
// midnight UTC (RFC 792); such a value says nothing about one-way delay.
const nonstandardBit = 1 << 31

// replyKind classifies a received ICMP message.
type replyKind uint8

const (
	replyNone        replyKind = iota // not for a prober (requests, other types, garbage)
	replyEcho                         // echo reply
	replyTimestamp                    // timestamp reply
	replyUnreachable                  // destination unreachable or time exceeded quoting a probe
)

// reply is a parsed ICMP message, reduced to what matching needs.
type reply struct {
	kind    replyKind
	id, seq uint16
	// payload is the echo reply's data (echo only).
	payload []byte
	// orig, recv and xmit are the timestamp reply's three stamps.
	orig, recv, xmit uint32
	// quotedDst is the destination of the quoted probe (unreachable only).
	quotedDst netip.Addr
	// quotedEcho tells whether the quoted probe was an echo (true) or a
	// timestamp request (false) (unreachable only).
	quotedEcho bool
}

// marshalEcho returns an echo request.
func marshalEcho(v6 bool, id, seq uint16, payload []byte) []byte {
	return putEcho(make([]byte, 8+len(payload)), v6, id, seq, payload)
}

// putEcho writes an echo request with payload into b (at least 8 +
// len(payload) bytes) and returns that part of b. For IPv6 the kernel
// fills in the checksum (it needs the pseudo-header), so it stays zero.
func putEcho(b []byte, v6 bool, id, seq uint16, payload []byte) []byte {
	b = b[:8+len(payload)]
	b[0], b[1], b[2], b[3] = typeEcho4, 0, 0, 0
	if v6 {
		b[0] = typeEcho6
	}
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], payload)
	if !v6 {
		binary.BigEndian.PutUint16(b[2:], checksum(b))
	}
	return b
}

// marshalTimestamp returns a 20-byte ICMP timestamp request (type 13).
// darwin's unprivileged ICMP sockets accept a timestamp request only when it
// is exactly 20 bytes long.
func marshalTimestamp(id, seq uint16, orig uint32) []byte {
	return putTimestamp(make([]byte, 20), id, seq, orig)
}

// putTimestamp writes marshalTimestamp's request into b (at least 20
// bytes) and returns that part of b.
func putTimestamp(b []byte, id, seq uint16, orig uint32) []byte {
	b = b[:20]
	clear(b)
	b[0] = typeTimestamp4
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	binary.BigEndian.PutUint32(b[8:], orig)
	binary.BigEndian.PutUint16(b[2:], checksum(b))
	return b
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// encodePayload returns the echo payload: magic, the prober's nonce and
// the probe's 32-bit sequence number.
func encodePayload(nonce uint64, ext uint32) []byte {
	var b [payloadLen]byte
	putPayload(b[:], nonce, ext)
	return b[:]
}

// putPayload writes encodePayload's payload into b (payloadLen bytes).
func putPayload(b []byte, nonce uint64, ext uint32) {
	copy(b, payloadMagic[:])
	binary.BigEndian.PutUint64(b[4:], nonce)
	binary.BigEndian.PutUint32(b[12:], ext)
}

// decodePayload returns the nonce and extended sequence number of an echo
// payload macake sent, or ok=false for anyone else's.
func decodePayload(b []byte) (nonce uint64, ext uint32, ok bool) {
	if len(b) < payloadLen || [4]byte(b[:4]) != payloadMagic {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(b[4:]), binary.BigEndian.Uint32(b[12:]), true
}

// stripIPv4Header removes a leading IPv4 header. darwin's unprivileged
// ICMP sockets sometimes return the whole IP packet despite IP_STRIPHDR
// (golang/go#47369). The ICMP types a prober reads (0, 3, 11, 14) never
// start with 0x4_, so a first nibble of 4 can only be an IP header.
func stripIPv4Header(b []byte) []byte {
	if len(b) < 20 || b[0]>>4 != 4 {
		return b
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || ihl > len(b) {
		return b
	}
	return b[ihl:]
}

// parseReply parses one ICMP message as read from a socket of the given
// family. It never panics on garbage; anything it cannot use is replyNone.
func parseReply(v6 bool, b []byte) reply {
	if !v6 {
		b = stripIPv4Header(b)
	}
	if len(b) < 8 {
		return reply{}
	}
	typ := b[0]
	id := binary.BigEndian.Uint16(b[4:])
	seq := binary.BigEndian.Uint16(b[6:])
	switch {
	case !v6 && typ == typeEchoReply4, v6 && typ == typeEchoReply6:
		return reply{kind: replyEcho, id: id, seq: seq, payload: b[8:]}
	case !v6 && typ == typeTimestampReply4:
		if len(b) < 20 {
			return reply{}
		}
		return reply{
			kind: replyTimestamp, id: id, seq: seq,
			orig: binary.BigEndian.Uint32(b[8:]),
			recv: binary.BigEndian.Uint32(b[12:]),
			xmit: binary.BigEndian.Uint32(b[16:]),
		}
	case !v6 && (typ == typeDstUnreach4 || typ == typeTimeExceeded4):
		return parseQuoted4(b[8:])
	case v6 && (typ == typeDstUnreach6 || typ == typeTimeExceeded6):
		return parseQuoted6(b[8:])
	}
	return reply{}
}

// parseQuoted4 reads the IPv4 header and first 8 bytes of the probe that an
// ICMP error quotes.
func parseQuoted4(q []byte) reply {
	if len(q) < 20 || q[0]>>4 != 4 {
		return reply{}
	}
	ihl := int(q[0]&0x0f) * 4
	if ihl < 20 || len(q) < ihl+8 || q[9] != 1 /* ICMP */ {
		return reply{}
	}
	t := q[ihl]
	if t != typeEcho4 && t != typeTimestamp4 {
		return reply{}
	}
	return reply{
		kind:       replyUnreachable,
		id:         binary.BigEndian.Uint16(q[ihl+4:]),
		seq:        binary.BigEndian.Uint16(q[ihl+6:]),
		quotedDst:  netip.AddrFrom4([4]byte(q[16:20])),
		quotedEcho: t == typeEcho4,
	}
}

// parseQuoted6 is parseQuoted4 for ICMPv6 (fixed 40-byte header, no
// extension headers on our probes).
func parseQuoted6(q []byte) reply {
	if len(q) < 48 || q[0]>>4 != 6 || q[6] != 58 /* ICMPv6 */ || q[40] != typeEcho6 {
		return reply{}
	}
	return reply{
		kind:       replyUnreachable,
		id:         binary.BigEndian.Uint16(q[44:]),
		seq:        binary.BigEndian.Uint16(q[46:]),
		quotedDst:  netip.AddrFrom16([16]byte(q[24:40])),
		quotedEcho: true,
	}
}

// msSinceMidnight returns t as fractional milliseconds since midnight UTC,
// the clock ICMP timestamps use.
func msSinceMidnight(t time.Time) float64 {
	u := t.UTC()
	y, m, d := u.Date()
	midnight := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	return float64(u.Sub(midnight)) / float64(time.Millisecond)
}

// wrapMs folds a difference of two ICMP timestamps into
// [-msPerDay/2, msPerDay/2), so a pair that straddles midnight UTC still
// gives a small delay.
func wrapMs(d float64) float64 {
	for d >= msPerDay/2 {
		d -= msPerDay
	}
	for d < -msPerDay/2 {
		d += msPerDay
	}
	return d
}

// oneWayDelays computes the upstream and downstream delays of a timestamp
// exchange. sent and received are the local send and receive times; recv
// and xmit the reflector's stamps. Both results contain the (unknown)
// offset between the two clocks with opposite signs, so only their changes
// mean anything; their sum is the round trip minus the reflector's
// processing time. ok is false when the reflector's clock is non-standard.
func oneWayDelays(sent, received time.Time, recv, xmit uint32) (up, down time.Duration, ok bool) {
	if recv&nonstandardBit != 0 || xmit&nonstandardBit != 0 || recv >= msPerDay || xmit >= msPerDay {
		return 0, 0, false
	}
	upMs := wrapMs(float64(recv) - msSinceMidnight(sent))
	downMs := wrapMs(msSinceMidnight(received) - float64(xmit))
	return time.Duration(upMs * float64(time.Millisecond)), time.Duration(downMs * float64(time.Millisecond)), true
}
