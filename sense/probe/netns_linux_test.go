// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/icmp"

	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/internal/speedtest"
)

// testbed is a client and a server namespace on one veth pair. The
// server's kernel is the reflector; its egress towards the client is a
// 10 Mbit/s bottleneck with a 250 KB drop-tail buffer (200 ms of bloat).
type testbed struct {
	client, server *netns.Namespace
	bottleneck     *netns.Bottleneck
}

const (
	serverIP4 = netns.ServerIP4
	serverIP6 = netns.ServerIP6
)

func newTestbed(t *testing.T) *testbed {
	tb := &testbed{}
	tb.client, tb.server = netns.New(t, "probe").Pair()
	tb.bottleneck = tb.server.Bottleneck(netns.ServerDev, 10_000_000, 250_000)
	return tb
}

// listenIn opens ICMP sockets inside ns.
func listenIn(ns *netns.Namespace) func(network, address string) (net.PacketConn, error) {
	return func(network, address string) (net.PacketConn, error) {
		var pc net.PacketConn
		err := ns.Do(func() error {
			c, err := icmp.ListenPacket(network, address)
			if err == nil {
				pc = c
			}
			return err
		})
		return pc, err
	}
}

// download streams from the server to the client (CUBIC on the sending
// side) until ctx ends.
func (tb *testbed) download(t *testing.T, ctx context.Context) {
	ln, err := tb.server.Listen(netns.CubicListenConfig(), "tcp", serverIP4+":0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer c.Close()
		if cc := speedtest.Congestion(c.(*net.TCPConn)); cc != "cubic" {
			t.Errorf("load socket uses %q, want cubic", cc)
		}
		buf := make([]byte, 32<<10)
		for ctx.Err() == nil {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := tb.client.Dial(ctx, nil, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	go io.Copy(io.Discard, c)
}

// idleThenLoaded lets the probers run idle for idle, then under a CUBIC
// download for 3 s, and returns when each phase began.
func (tb *testbed) idleThenLoaded(t *testing.T, ctx context.Context, idle time.Duration) (start, loadStart time.Time) {
	start = time.Now()
	time.Sleep(idle)
	loadStart = time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	tb.download(t, loadCtx)
	time.Sleep(3 * time.Second)
	return start, loadStart
}

// p50 is the median of ds, -1 when empty.
func p50(ds []time.Duration) time.Duration { return Percentile(ds, 50) }

// collect gathers samples from p until ctx ends.
func collect(p *Prober) (get func(since time.Time) []Sample) {
	var mu sync.Mutex
	var all []Sample
	go func() {
		for s := range p.Samples() {
			mu.Lock()
			all = append(all, s)
			mu.Unlock()
		}
	}()
	return func(since time.Time) []Sample {
		mu.Lock()
		defer mu.Unlock()
		var out []Sample
		for _, s := range all {
			if !s.Sent.Before(since) {
				out = append(out, s)
			}
		}
		return out
	}
}

func TestNetnsProbesSeeQueueingDelayGrowUnderLoad(t *testing.T) {
	tb := newTestbed(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	// Unprivileged echo over IPv4 and IPv6 (ping_group_range allows it in
	// the namespace), and a raw socket sending ICMP timestamps, which the
	// Linux kernel answers.
	echo, err := New(Config{Reflectors: []netip.Addr{netip.MustParseAddr(serverIP4), netip.MustParseAddr(serverIP6)}, Interval: 100 * time.Millisecond, Socket: SocketDatagram, Listen: listenIn(tb.client)})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := New(Config{Reflectors: []netip.Addr{netip.MustParseAddr(serverIP4)}, Interval: 100 * time.Millisecond, Socket: SocketRaw, Listen: listenIn(tb.client)})
	if err != nil {
		t.Fatal(err)
	}
	go echo.Run(ctx)
	go ts.Run(ctx)
	echoSamples, tsSamples := collect(echo), collect(ts)

	start, loadStart := tb.idleThenLoaded(t, ctx, 1200*time.Millisecond)

	split := func(samples []Sample, from, to time.Time, pick func(Sample) time.Duration) []time.Duration {
		var out []time.Duration
		for _, s := range samples {
			if s.Kind == KindReply && !s.Sent.Before(from) && s.Sent.Before(to) {
				out = append(out, pick(s))
			}
		}
		return out
	}
	rtt := func(s Sample) time.Duration { return s.RTT }
	for _, fam := range []string{serverIP4, serverIP6} {
		var fs []Sample
		for _, s := range echoSamples(start) {
			if s.Reflector == netip.MustParseAddr(fam) {
				fs = append(fs, s)
			}
		}
		idle := p50(split(fs, start.Add(200*time.Millisecond), loadStart, rtt))
		loaded := p50(split(fs, loadStart.Add(1500*time.Millisecond), loadStart.Add(3*time.Second), rtt))
		t.Logf("%s echo RTT: idle p50 %v, loaded p50 %v", fam, idle, loaded)
		if idle < 0 || idle > 5*time.Millisecond {
			t.Errorf("%s: idle RTT %v, want a few hundred µs on a veth", fam, idle)
		}
		// 250 KB at 10 Mbit/s is 200 ms of queue once CUBIC fills it.
		if loaded < 80*time.Millisecond || loaded > 260*time.Millisecond {
			t.Errorf("%s: loaded RTT %v, want 100-200 ms of queueing (CUBIC keeps the queue between half and full)", fam, loaded)
		}
	}

	// Timestamps put the delay in the right direction: the download queue
	// grows the downstream delay, the upstream one stays flat.
	all := tsSamples(start)
	var owd []Sample
	for _, s := range all {
		if s.OWD {
			owd = append(owd, s)
		}
	}
	if len(owd) < len(all)/2 {
		t.Fatalf("only %d of %d raw-socket samples carried timestamps", len(owd), len(all))
	}
	down := func(s Sample) time.Duration { return s.DownOWD }
	up := func(s Sample) time.Duration { return s.UpOWD }
	idleDown, idleUp := p50(split(owd, start, loadStart, down)), p50(split(owd, start, loadStart, up))
	loadDown, loadUp := p50(split(owd, loadStart.Add(1500*time.Millisecond), loadStart.Add(3*time.Second), down)), p50(split(owd, loadStart.Add(1500*time.Millisecond), loadStart.Add(3*time.Second), up))
	t.Logf("timestamp OWD: down %v -> %v, up %v -> %v", idleDown, loadDown, idleUp, loadUp)
	if loadDown-idleDown < 80*time.Millisecond {
		t.Errorf("downstream OWD grew by %v under download, want 100-200ms", loadDown-idleDown)
	}
	if d := loadUp - idleUp; d > 5*time.Millisecond || d < -5*time.Millisecond {
		t.Errorf("upstream OWD moved by %v under a download-only load, want ~0", d)
	}
	if st := echo.Stats(); st.Reflectors[0].Lost > 2 {
		t.Errorf("echo losses: %+v", st.Reflectors)
	}
}

func TestNetnsOtherProbersRepliesAreNotOurs(t *testing.T) {
	tb := newTestbed(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	refl := []netip.Addr{netip.MustParseAddr(serverIP4)}
	// Raw sockets see every ICMP reply on the host, like darwin's
	// datagram sockets: each prober must reject the other's.
	a, err := New(Config{Reflectors: refl, Interval: 50 * time.Millisecond, Socket: SocketRaw, NoTimestamps: true, Listen: listenIn(tb.client)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Reflectors: refl, Interval: 50 * time.Millisecond, Socket: SocketRaw, Listen: listenIn(tb.client)})
	if err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx)
	go b.Run(ctx)
	ga, gb := collect(a), collect(b)
	time.Sleep(time.Second)
	cancel()
	time.Sleep(50 * time.Millisecond)
	sa, sb := a.Stats(), b.Stats()
	if sa.Foreign == 0 || sb.Foreign == 0 {
		t.Errorf("foreign a=%d b=%d: each raw socket must have seen and rejected the other's replies", sa.Foreign, sb.Foreign)
	}
	for _, s := range []ReflectorStats{sa.Reflectors[0], sb.Reflectors[0]} {
		if s.Duplicates != 0 || s.Received > s.Sent || s.Received < s.Sent-2 {
			t.Errorf("stats %+v: want one reply per own probe", s)
		}
	}
	if n := len(ga(time.Time{})); n > sa.Reflectors[0].Sent {
		t.Errorf("a delivered %d samples for %d probes", n, sa.Reflectors[0].Sent)
	}
	if n := len(gb(time.Time{})); n > sb.Reflectors[0].Sent {
		t.Errorf("b delivered %d samples for %d probes", n, sb.Reflectors[0].Sent)
	}
}

func TestNetnsSilentUnreachableAndVanishingInterface(t *testing.T) {
	tb := newTestbed(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tb.server.Sysctl("net.ipv4.icmp_echo_ignore_all", "1")
	silent := netip.MustParseAddr(serverIP4)
	noRoute := netip.MustParseAddr("198.51.100.7") // the client has no default route
	p, err := New(Config{Reflectors: []netip.Addr{silent, noRoute}, Interval: 100 * time.Millisecond, Timeout: 300 * time.Millisecond, Socket: SocketDatagram, Listen: listenIn(tb.client)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	get := collect(p)
	time.Sleep(time.Second)
	if !p.Stalled(time.Now(), 500*time.Millisecond) {
		t.Error("no reflector answers, yet the prober is not stalled")
	}
	// Now let the server answer, then delete the link under the prober.
	tb.server.Sysctl("net.ipv4.icmp_echo_ignore_all", "0")
	time.Sleep(500 * time.Millisecond)
	if p.Stalled(time.Now(), 500*time.Millisecond) {
		t.Error("stalled although the server answers again")
	}
	tb.client.IP("link", "del", netns.ClientDev)
	time.Sleep(700 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	var lost, unreach, replies int
	for _, s := range get(time.Time{}) {
		switch s.Kind {
		case KindReply:
			replies++
			if s.RTT <= 0 {
				t.Errorf("reply without RTT: %+v", s)
			}
		case KindLost:
			lost++
		case KindUnreachable:
			unreach++
			if s.Reflector == noRoute && s.Err == "" {
				t.Errorf("unreachable without a reason: %+v", s)
			}
		}
	}
	t.Logf("replies %d, lost %d, unreachable %d", replies, lost, unreach)
	if replies == 0 || lost < 5 || unreach < 10 {
		t.Errorf("replies %d, lost %d, unreachable %d", replies, lost, unreach)
	}
}
