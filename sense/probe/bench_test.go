// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/macake/macake/sense/probe/wire"
)

func BenchmarkParseReply(b *testing.B) {
	echo := wire.MarshalEcho(false, 0xbeef, 3, wire.EncodePayload(42, 9))
	echo[0] = wire.TypeEchoReply4
	b.ReportAllocs()
	for b.Loop() {
		wire.ParseReply(false, echo)
	}
}

// discardConn is a raw socket whose sends go nowhere, so that measuring
// the prober's work leaves a fake network's bookkeeping out.
type discardConn struct{ net.PacketConn }

func (discardConn) WriteTo(b []byte, _ net.Addr) (int, error) { return len(b), nil }
func (discardConn) Close() error                              { return nil }

// roundTrip does the prober's work for one probe: build and send an echo
// request, then match its reply and deliver the sample (the consumer
// takes it). reply is scratch space for the reply.
func roundTrip(p *Prober, reply []byte, now time.Time) {
	s, t := p.socks[0], p.targets[0]
	p.mu.Lock()
	p.send(s, t, MethodEcho, false, now)
	seq, ext := p.seq, p.ext
	p.mu.Unlock()
	var payload [wire.PayloadLen]byte
	wire.PutPayload(payload[:], p.nonce, ext)
	r := wire.PutEcho(reply, false, p.id, seq, payload[:])
	r[0] = wire.TypeEchoReply4
	p.handle(s, t.addr, wire.ParseReply(false, r), now)
	<-p.samples
	p.step(now.Add(time.Millisecond)) // retires the answered probe, as the next send does
}

func newDiscardProber(tb testing.TB) *Prober {
	tb.Helper()
	p, err := New(Config{
		Reflectors: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, NoTimestamps: true, Socket: SocketRaw, Buffer: 1,
		Listen: func(string, string) (net.PacketConn, error) { return discardConn{}, nil },
	})
	if err != nil {
		tb.Fatal(err)
	}
	p.paused = true // step only retires; roundTrip sends
	return p
}

// BenchmarkProbeRoundTrip is the prober's own work per probe (see
// roundTrip); the socket reads and writes are not in it.
func BenchmarkProbeRoundTrip(b *testing.B) {
	p := newDiscardProber(b)
	reply := make([]byte, 64)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		roundTrip(p, reply, now)
		now = now.Add(50 * time.Millisecond)
	}
}

// TestProbeRoundTripDoesNotAllocate keeps the prober's per-probe work
// free of allocations (a daemon probes 20 times a second for days).
func TestProbeRoundTripDoesNotAllocate(t *testing.T) {
	p := newDiscardProber(t)
	reply := make([]byte, 64)
	now := time.Now()
	for range 500 { // past the warm-up: the maps and queues have grown
		roundTrip(p, reply, now)
		now = now.Add(50 * time.Millisecond)
	}
	if n := testing.AllocsPerRun(200, func() {
		roundTrip(p, reply, now)
		now = now.Add(50 * time.Millisecond)
	}); n != 0 {
		t.Errorf("%v allocations per probe, want 0", n)
	}
}

// TestFIFOKeepsOrderAcrossCompaction: elements come out in the order they
// went in while the storage is reused (moved down, grown).
func TestFIFOKeepsOrderAcrossCompaction(t *testing.T) {
	var q fifo[int]
	next, want := 0, 0
	for round := range 200 {
		for range round%7 + 1 {
			q.push(next)
			next++
		}
		for range round % 5 {
			if q.len() == 0 {
				break
			}
			if got := q.pop(); got != want {
				t.Fatalf("round %d: popped %d, want %d", round, got, want)
			}
			want++
		}
	}
	for q.len() > 0 {
		if got := q.pop(); got != want {
			t.Fatalf("draining: popped %d, want %d", got, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("%d out, %d in", want, next)
	}
}
