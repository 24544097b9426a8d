// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

func TestMarshalTimestampIsTwentyBytesWithValidChecksum(t *testing.T) {
	b := MarshalTimestamp(0x1234, 7, 66954797)
	if len(b) != 20 {
		t.Fatalf("len %d, darwin accepts exactly 20", len(b))
	}
	if Checksum(b) != 0 {
		t.Errorf("Checksum does not verify: % x", b)
	}
	want, _ := hex.DecodeString("0d00" + "0000" + "1234" + "0007" + "03fda62d" + "00000000" + "00000000")
	copy(want[2:4], b[2:4])
	if !bytes.Equal(b, want) {
		t.Errorf("got % x\nwant % x", b, want)
	}
}

func TestParseReply(t *testing.T) {
	echo4 := MarshalEcho(false, 0xbeef, 3, EncodePayload(42, 9))
	echo4[0] = TypeEchoReply4
	withIPHeader := append(append(make([]byte, 0, 40), 0x45, 0, 0, 36, 0, 0, 0, 0, 64, 1, 0, 0, 1, 1, 1, 1, 10, 0, 0, 2), echo4...)
	ts := MarshalTimestamp(0xbeef, 4, 1000)
	ts[0] = TypeTimestampReply4
	copy(ts[12:], []byte{0, 0, 0x03, 0xf0, 0, 0, 0x03, 0xf1})
	unreach := Unreachable4(netip.MustParseAddr("203.0.113.5"), MarshalEcho(false, 0xbeef, 5, nil))
	echo6 := MarshalEcho(true, 0xbeef, 6, EncodePayload(42, 10))
	echo6[0] = TypeEchoReply6

	for _, tc := range []struct {
		name string
		v6   bool
		b    []byte
		want Reply
	}{
		{"echo reply", false, echo4, Reply{Kind: ReplyEcho, ID: 0xbeef, Seq: 3}},
		{"echo reply behind an IPv4 header (golang/go#47369)", false, withIPHeader, Reply{Kind: ReplyEcho, ID: 0xbeef, Seq: 3}},
		{"timestamp reply", false, ts, Reply{Kind: ReplyTimestamp, ID: 0xbeef, Seq: 4, Orig: 1000, Recv: 1008, Xmit: 1009}},
		{"destination unreachable quoting an echo", false, unreach, Reply{Kind: ReplyUnreachable, ID: 0xbeef, Seq: 5, QuotedDst: netip.MustParseAddr("203.0.113.5"), QuotedEcho: true}},
		{"echo request is not a reply", false, MarshalEcho(false, 1, 1, nil), Reply{}},
		{"truncated", false, echo4[:5], Reply{}},
		{"short timestamp", false, ts[:12], Reply{}},
		{"ICMPv6 echo reply", true, echo6, Reply{Kind: ReplyEcho, ID: 0xbeef, Seq: 6}},
		{"ICMPv4 type on a v6 socket", true, echo4, Reply{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseReply(tc.v6, tc.b)
			got.Payload = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	r := ParseReply(false, echo4)
	if n, ext, ok := DecodePayload(r.Payload); !ok || n != 42 || ext != 9 {
		t.Errorf("payload decodes to %d %d %v", n, ext, ok)
	}
	if _, _, ok := DecodePayload([]byte("somebody else's ping payload")); ok {
		t.Error("foreign payload decoded")
	}
}

func TestOneWayDelays(t *testing.T) {
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name           string
		sent, received time.Time
		recv, xmit     uint32
		up, down       time.Duration
		ok             bool
	}{
		{"noon", day.Add(12 * time.Hour), day.Add(12*time.Hour + 40*time.Millisecond), 43_200_010, 43_200_010, 10 * time.Millisecond, 30 * time.Millisecond, true},
		{"reflector already past midnight", day.Add(-5 * time.Millisecond), day.Add(35 * time.Millisecond), 5, 5, 10 * time.Millisecond, 30 * time.Millisecond, true},
		{"we are past midnight, reflector is not", day.Add(2 * time.Millisecond), day.Add(42 * time.Millisecond), 86_399_990, 86_399_990, -12 * time.Millisecond, 52 * time.Millisecond, true},
		{"non-standard bit", day, day, 1 << 31, 1 << 31, 0, 0, false},
		{"out of range", day, day, MsPerDay, 0, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, down, ok := OneWayDelays(tc.sent, tc.received, tc.recv, tc.xmit)
			if ok != tc.ok || up != tc.up || down != tc.down {
				t.Errorf("got up=%v down=%v ok=%v, want %v %v %v", up, down, ok, tc.up, tc.down, tc.ok)
			}
		})
	}
}

func FuzzParseReply(f *testing.F) {
	echo := MarshalEcho(false, 1, 2, EncodePayload(3, 4))
	echo[0] = TypeEchoReply4
	f.Add(false, echo)
	f.Add(false, MarshalTimestamp(1, 2, 3))
	f.Add(false, Unreachable4(netip.MustParseAddr("192.0.2.1"), echo))
	f.Add(true, []byte{1, 0, 0, 0, 0, 0, 0, 0, 0x60, 0, 0, 0, 0, 8, 58, 64})
	f.Add(false, []byte{0x45, 0, 0, 0})
	f.Fuzz(func(t *testing.T, v6 bool, b []byte) {
		r := ParseReply(v6, b)
		if r.Kind == ReplyEcho && len(r.Payload) > len(b) {
			t.Fatalf("payload longer than the packet")
		}
	})
}

// TestMarshalEchoMatchesXNetICMP: the hand-written echo request (no
// allocation per probe) is byte for byte what x/net/icmp builds.
func TestMarshalEchoMatchesXNetICMP(t *testing.T) {
	payload := EncodePayload(0x0123456789abcdef, 77)
	for _, v6 := range []bool{false, true} {
		var typ icmp.Type = ipv4.ICMPTypeEcho
		if v6 {
			typ = ipv6.ICMPTypeEchoRequest
		}
		want, err := (&icmp.Message{Type: typ, Body: &icmp.Echo{ID: 0xbeef, Seq: 513, Data: payload}}).Marshal(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := MarshalEcho(v6, 0xbeef, 513, payload); !bytes.Equal(got, want) {
			t.Errorf("v6=%v: got % x\nwant % x", v6, got, want)
		}
	}
}
