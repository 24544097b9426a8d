// SPDX-License-Identifier: Apache-2.0

// Package wire is the probes' packets as bytes: the ICMP echo and
// timestamp requests a prober sends (MarshalEcho, PutEcho,
// MarshalTimestamp, PutTimestamp), the payload every echo carries, the
// replies and errors it reads back (ParseReply), the Internet checksum, and
// the one-way delays an ICMP timestamp exchange gives (OneWayDelays). It is
// pure: no socket, no clock.
package wire

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// ICMP type numbers used here. ICMP timestamps exist only in ICMPv4.
const (
	TypeEchoReply4      = 0
	TypeDstUnreach4     = 3
	TypeEcho4           = 8
	TypeTimeExceeded4   = 11
	TypeTimestamp4      = 13
	TypeTimestampReply4 = 14

	TypeDstUnreach6   = 1
	TypeTimeExceeded6 = 3
	TypeEcho6         = 128
	TypeEchoReply6    = 129
)

// payloadMagic starts every echo payload macake sends, so a packet capture
// shows whose probe it is.
var payloadMagic = [4]byte{'m', 'c', 'k', '1'}

// PayloadLen is magic (4) + nonce (8) + extended sequence number (4).
const PayloadLen = 16

// MsPerDay is where ICMP timestamps (milliseconds since midnight UTC) wrap.
const MsPerDay = 86_400_000

// NonstandardBit is set by a host whose timestamp is not milliseconds since
// midnight UTC (RFC 792); such a value says nothing about one-way delay.
const NonstandardBit = 1 << 31

// ReplyKind classifies a received ICMP message.
type ReplyKind uint8

// The kinds of a received ICMP message.
const (
	ReplyNone        ReplyKind = iota // not for a prober (requests, other types, garbage)
	ReplyEcho                         // echo reply
	ReplyTimestamp                    // timestamp reply
	ReplyUnreachable                  // destination unreachable or time exceeded quoting a probe
)

// Reply is a parsed ICMP message, reduced to what matching needs.
type Reply struct {
	Kind    ReplyKind
	ID, Seq uint16
	// Payload is the echo reply's data (echo only).
	Payload []byte
	// Orig, Recv and Xmit are the timestamp reply's three stamps.
	Orig, Recv, Xmit uint32
	// QuotedDst is the destination of the quoted probe (unreachable only).
	QuotedDst netip.Addr
	// QuotedEcho tells whether the quoted probe was an echo (true) or a
	// timestamp request (false) (unreachable only).
	QuotedEcho bool
}

// MarshalEcho returns an echo request.
func MarshalEcho(v6 bool, id, seq uint16, payload []byte) []byte {
	return PutEcho(make([]byte, 8+len(payload)), v6, id, seq, payload)
}

// PutEcho writes an echo request with payload into b (at least 8 +
// len(payload) bytes) and returns that part of b. For IPv6 the kernel
// fills in the Checksum (it needs the pseudo-header), so it stays zero.
func PutEcho(b []byte, v6 bool, id, seq uint16, payload []byte) []byte {
	b = b[:8+len(payload)]
	b[0], b[1], b[2], b[3] = TypeEcho4, 0, 0, 0
	if v6 {
		b[0] = TypeEcho6
	}
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], payload)
	if !v6 {
		binary.BigEndian.PutUint16(b[2:], Checksum(b))
	}
	return b
}

// MarshalTimestamp returns a 20-byte ICMP timestamp request (type 13).
// darwin's unprivileged ICMP sockets accept a timestamp request only when it
// is exactly 20 bytes long.
func MarshalTimestamp(id, seq uint16, orig uint32) []byte {
	return PutTimestamp(make([]byte, 20), id, seq, orig)
}

// PutTimestamp writes MarshalTimestamp's request into b (at least 20
// bytes) and returns that part of b.
func PutTimestamp(b []byte, id, seq uint16, orig uint32) []byte {
	b = b[:20]
	clear(b)
	b[0] = TypeTimestamp4
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	binary.BigEndian.PutUint32(b[8:], orig)
	binary.BigEndian.PutUint16(b[2:], Checksum(b))
	return b
}

// Checksum is the Internet Checksum (RFC 1071).
func Checksum(b []byte) uint16 {
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

// EncodePayload returns the echo Payload: magic, the prober's nonce and
// the probe's 32-bit sequence number.
func EncodePayload(nonce uint64, ext uint32) []byte {
	var b [PayloadLen]byte
	PutPayload(b[:], nonce, ext)
	return b[:]
}

// PutPayload writes EncodePayload's payload into b (PayloadLen bytes).
func PutPayload(b []byte, nonce uint64, ext uint32) {
	copy(b, payloadMagic[:])
	binary.BigEndian.PutUint64(b[4:], nonce)
	binary.BigEndian.PutUint32(b[12:], ext)
}

// DecodePayload returns the nonce and extended sequence number of an echo
// payload macake sent, or ok=false for anyone else's.
func DecodePayload(b []byte) (nonce uint64, ext uint32, ok bool) {
	if len(b) < PayloadLen || [4]byte(b[:4]) != payloadMagic {
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

// ParseReply parses one ICMP message as read from a socket of the given
// family. It never panics on garbage; anything it cannot use is ReplyNone.
func ParseReply(v6 bool, b []byte) Reply {
	if !v6 {
		b = stripIPv4Header(b)
	}
	if len(b) < 8 {
		return Reply{}
	}
	typ := b[0]
	id := binary.BigEndian.Uint16(b[4:])
	seq := binary.BigEndian.Uint16(b[6:])
	switch {
	case !v6 && typ == TypeEchoReply4, v6 && typ == TypeEchoReply6:
		return Reply{Kind: ReplyEcho, ID: id, Seq: seq, Payload: b[8:]}
	case !v6 && typ == TypeTimestampReply4:
		if len(b) < 20 {
			return Reply{}
		}
		return Reply{
			Kind: ReplyTimestamp, ID: id, Seq: seq,
			Orig: binary.BigEndian.Uint32(b[8:]),
			Recv: binary.BigEndian.Uint32(b[12:]),
			Xmit: binary.BigEndian.Uint32(b[16:]),
		}
	case !v6 && (typ == TypeDstUnreach4 || typ == TypeTimeExceeded4):
		return parseQuoted4(b[8:])
	case v6 && (typ == TypeDstUnreach6 || typ == TypeTimeExceeded6):
		return parseQuoted6(b[8:])
	}
	return Reply{}
}

// parseQuoted4 reads the IPv4 header and first 8 bytes of the probe that an
// ICMP error quotes.
func parseQuoted4(q []byte) Reply {
	if len(q) < 20 || q[0]>>4 != 4 {
		return Reply{}
	}
	ihl := int(q[0]&0x0f) * 4
	if ihl < 20 || len(q) < ihl+8 || q[9] != 1 /* ICMP */ {
		return Reply{}
	}
	t := q[ihl]
	if t != TypeEcho4 && t != TypeTimestamp4 {
		return Reply{}
	}
	return Reply{
		Kind:       ReplyUnreachable,
		ID:         binary.BigEndian.Uint16(q[ihl+4:]),
		Seq:        binary.BigEndian.Uint16(q[ihl+6:]),
		QuotedDst:  netip.AddrFrom4([4]byte(q[16:20])),
		QuotedEcho: t == TypeEcho4,
	}
}

// parseQuoted6 is parseQuoted4 for ICMPv6 (fixed 40-byte header, no
// extension headers on our probes).
func parseQuoted6(q []byte) Reply {
	if len(q) < 48 || q[0]>>4 != 6 || q[6] != 58 /* ICMPv6 */ || q[40] != TypeEcho6 {
		return Reply{}
	}
	return Reply{
		Kind:       ReplyUnreachable,
		ID:         binary.BigEndian.Uint16(q[44:]),
		Seq:        binary.BigEndian.Uint16(q[46:]),
		QuotedDst:  netip.AddrFrom16([16]byte(q[24:40])),
		QuotedEcho: true,
	}
}

// MsSinceMidnight returns t as fractional milliseconds since midnight UTC,
// the clock ICMP timestamps use.
func MsSinceMidnight(t time.Time) float64 {
	u := t.UTC()
	y, m, d := u.Date()
	midnight := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	return float64(u.Sub(midnight)) / float64(time.Millisecond)
}

// wrapMs folds a difference of two ICMP timestamps into
// [-MsPerDay/2, MsPerDay/2), so a pair that straddles midnight UTC still
// gives a small delay.
func wrapMs(d float64) float64 {
	for d >= MsPerDay/2 {
		d -= MsPerDay
	}
	for d < -MsPerDay/2 {
		d += MsPerDay
	}
	return d
}

// OneWayDelays computes the upstream and downstream delays of a timestamp
// exchange. sent and received are the local send and receive times; recv
// and xmit the reflector's stamps. Both results contain the (unknown)
// offset between the two clocks with opposite signs, so only their changes
// mean anything; their sum is the round trip minus the reflector's
// processing time. ok is false when the reflector's clock is non-standard.
func OneWayDelays(sent, received time.Time, recv, xmit uint32) (up, down time.Duration, ok bool) {
	if recv&NonstandardBit != 0 || xmit&NonstandardBit != 0 || recv >= MsPerDay || xmit >= MsPerDay {
		return 0, 0, false
	}
	upMs := wrapMs(float64(recv) - MsSinceMidnight(sent))
	downMs := wrapMs(MsSinceMidnight(received) - float64(xmit))
	return time.Duration(upMs * float64(time.Millisecond)), time.Duration(downMs * float64(time.Millisecond)), true
}

// Unreachable4 returns the ICMPv4 host unreachable that router 10.0.0.2
// sends back for req, an ICMPv4 probe to to: the error a prober matches
// to its probe by the quoted header (the fakes of tests answer with it).
func Unreachable4(to netip.Addr, req []byte) []byte {
	// type 3 code 1, unused, then the quoted IPv4 header and 8 bytes.
	b := make([]byte, 8+20+8)
	b[0] = TypeDstUnreach4
	b[1] = 1
	q := b[8:]
	q[0] = 0x45
	q[9] = 1
	copy(q[12:16], []byte{10, 0, 0, 2})
	copy(q[16:20], to.AsSlice())
	copy(q[20:], req[:8])
	return b
}
