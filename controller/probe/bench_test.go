// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"net/netip"
	"testing"
	"time"
)

func BenchmarkParseReply(b *testing.B) {
	echo := marshalEcho(false, 0xbeef, 3, encodePayload(42, 9))
	echo[0] = typeEchoReply4
	b.ReportAllocs()
	for b.Loop() {
		parseReply(false, echo)
	}
}

// BenchmarkProbeRoundTrip is the prober's own work per probe: build and
// send an echo request, then match its reply and deliver the sample.
func BenchmarkProbeRoundTrip(b *testing.B) {
	n := newFakeNet()
	p, err := New(Config{Reflectors: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, NoTimestamps: true, Socket: SocketRaw, Listen: n.listen, Buffer: 1})
	if err != nil {
		b.Fatal(err)
	}
	s := p.socks[0]
	t := p.targets[0]
	src := netip.MustParseAddr("192.0.2.1")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		p.mu.Lock()
		p.send(s, t, MethodEcho, false, now)
		seq, ext := p.seq, p.ext
		p.mu.Unlock()
		reply := marshalEcho(false, p.id, seq, encodePayload(p.nonce, ext))
		reply[0] = typeEchoReply4
		p.handle(s, src, parseReply(false, reply), now)
		p.mu.Lock()
		p.queue = p.queue[:0]
		clear(p.recent)
		p.recentQ = p.recentQ[:0]
		p.mu.Unlock()
	}
}
