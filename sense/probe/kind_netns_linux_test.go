// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/shape"
)

// serveKinds starts the server side of the TCP and UDP probes on both of
// the server's addresses.
func (tb *testbed) serveKinds(t *testing.T) {
	t.Helper()
	for _, a := range []string{serverIP4, serverIP6} {
		tb.server.ServeTCP("tcp", net.JoinHostPort(a, "443"))
		tb.server.SlowUDPEcho(0, net.JoinHostPort(a, "7"))
	}
}

func reflector(t *testing.T, s string) shape.Reflector {
	t.Helper()
	r, err := shape.ParseReflector(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// kindProber probes rs from the client namespace.
func (tb *testbed) kindProber(t *testing.T, mode SocketMode, timeout time.Duration, rs ...shape.Reflector) *Prober {
	t.Helper()
	p, err := New(Config{Reflectors: shape.ReflectorAddrs(rs), Probes: rs, Interval: 100 * time.Millisecond, Timeout: timeout,
		Socket: mode, Listen: listenIn(tb.client), InNetwork: tb.client.Do})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNetnsTCPAndUDPProbesAnswer probes an open TCP port (SYN-ACK), a
// closed one (RST) and a UDP echo, over IPv4 and IPv6, with raw SYNs and
// with connect(): every probe is answered, as its kind, in well under a
// millisecond's worth of veth, and the reflector keeps no connection.
func TestNetnsTCPAndUDPProbesAnswer(t *testing.T) {
	tb := newTestbed(t)
	tb.serveKinds(t)
	// One address per reflector: TCP open on v4, TCP closed on v6 for
	// one mode, the other way round for the other.
	for _, c := range []struct {
		mode   SocketMode
		socket string
		rs     []string
	}{
		{SocketRaw, "raw SYN", []string{"tcp:" + serverIP4 + ":443", "tcp:[" + serverIP6 + "]:444"}},
		{SocketRaw, "raw SYN", []string{"tcp:" + serverIP4 + ":444", "tcp:[" + serverIP6 + "]:443"}},
		{SocketDatagram, "connect", []string{"tcp:" + serverIP4 + ":443", "tcp:[" + serverIP6 + "]:444"}},
		{SocketDatagram, "connect", []string{"tcp:" + serverIP4 + ":444", "tcp:[" + serverIP6 + "]:443"}},
		{SocketAuto, "echo", []string{"udp:" + serverIP4 + ":7", "udp:[" + serverIP6 + "]:7"}},
	} {
		t.Run(strings.Join(c.rs, ","), func(t *testing.T) {
			var rs []shape.Reflector
			for _, s := range c.rs {
				rs = append(rs, reflector(t, s))
			}
			p := tb.kindProber(t, c.mode, time.Second, rs...)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error)
			go func() { done <- p.Run(ctx) }()
			get := collect(p)
			time.Sleep(1100 * time.Millisecond)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			st := p.Stats()
			for _, sock := range st.Sockets {
				if strings.Contains(sock, "tcp") || strings.Contains(sock, "udp") {
					if !strings.Contains(sock, c.socket) {
						t.Errorf("socket %q, want %s", sock, c.socket)
					}
				}
			}
			for i, r := range rs {
				var rtts []time.Duration
				for _, s := range get(time.Time{}) {
					if s.Reflector != r.Addr {
						continue
					}
					if s.Kind != KindReply || s.Method != methodOf(r.Kind) || s.OWD {
						t.Errorf("%s: sample %+v, want a %s reply", r, s, r.Kind)
						continue
					}
					rtts = append(rtts, s.RTT)
				}
				rs := st.Reflectors[i]
				t.Logf("%s: %d replies, p50 %v, stats %+v", r, len(rtts), p50(rtts), rs)
				// The probe in flight when Run ended is never reported.
				if len(rtts) < 8 || rs.Received < rs.Sent-1 || rs.Lost+rs.Unreachable+rs.Duplicates+rs.Late != 0 || rs.Method != methodOf(r.Kind) {
					t.Errorf("%s: %d replies, stats %+v: want every probe answered once", r, len(rtts), rs)
				}
				if m := p50(rtts); m <= 0 || m > 5*time.Millisecond {
					t.Errorf("%s: p50 RTT %v on an idle veth", r, m)
				}
			}
			if st.Foreign != 0 {
				t.Errorf("%d foreign replies on a quiet link", st.Foreign)
			}
			// Neither raw SYNs (reset by the client's kernel) nor
			// connect() (closed with a reset) leave a connection on
			// the reflector.
			time.Sleep(100 * time.Millisecond)
			if out := tb.server.Exec("ss", "-Htan", "state", "all", "( sport = :443 or sport = :444 )"); strings.Contains(out, "ESTAB") || strings.Contains(out, "SYN-RECV") || strings.Contains(out, "TIME-WAIT") {
				t.Errorf("the reflector keeps connections:\n%s", out)
			}
		})
	}
}

// TestNetnsTCPProbesSeeTheQueue: under a download through the server's
// bloated egress, TCP handshakes and UDP echoes queue behind the load as
// ICMP does: all three kinds see the same 100-200 ms.
func TestNetnsTCPProbesSeeTheQueue(t *testing.T) {
	tb := newTestbed(t)
	tb.serveKinds(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	raw := tb.kindProber(t, SocketRaw, 2*time.Second, reflector(t, "tcp:"+serverIP4+":443"), reflector(t, "udp:["+serverIP6+"]:7"))
	conn := tb.kindProber(t, SocketDatagram, 2*time.Second, reflector(t, "tcp:"+serverIP4+":444"))
	icmp := tb.kindProber(t, SocketDatagram, 2*time.Second, reflector(t, serverIP4))
	var gets []func(time.Time) []Sample
	for _, p := range []*Prober{raw, conn, icmp} {
		go p.Run(ctx)
		gets = append(gets, collect(p))
	}
	start, loadStart := tb.idleThenLoaded(t, ctx, time.Second)
	time.Sleep(300 * time.Millisecond)
	// The download's thousands of segments never reach the raw socket's
	// reader: its filter passes only what goes to the reserved port.
	raw.mu.Lock()
	rawTCP := raw.k.senders[senderKey{kind: shape.ProbeTCP}].(*rawTCPSender)
	raw.mu.Unlock()
	sent := raw.Stats().Reflectors
	if reads := rawTCP.reads.Load(); reads > int64(sent[0].Sent+2) {
		t.Errorf("the raw TCP socket's reader woke for %d segments; %d probes were sent", reads, sent[0].Sent)
	}
	for i, name := range []string{"raw", "connect", "icmp"} {
		byAddr := map[netip.Addr][2][]time.Duration{}
		for _, s := range gets[i](start) {
			if s.Kind != KindReply {
				continue
			}
			w := byAddr[s.Reflector]
			switch {
			case s.Sent.Before(loadStart):
				w[0] = append(w[0], s.RTT)
			case s.Sent.After(loadStart.Add(1500 * time.Millisecond)):
				w[1] = append(w[1], s.RTT)
			}
			byAddr[s.Reflector] = w
		}
		if len(byAddr) == 0 {
			t.Fatalf("%s: no replies", name)
		}
		for a, w := range byAddr {
			idle, loaded := p50(w[0]), p50(w[1])
			t.Logf("%s %s: idle p50 %v, loaded p50 %v", name, a, idle, loaded)
			if idle < 0 || idle > 5*time.Millisecond || loaded < 80*time.Millisecond || loaded > 260*time.Millisecond {
				t.Errorf("%s %s: idle %v, loaded %v; want ~0 idle and the 100-200 ms queue under load", name, a, idle, loaded)
			}
		}
	}
}

// TestNetnsTCPProbesThatGoUnansweredAreLost: the server drops packets to
// an address it does not have (forwarding is off), so nothing answers:
// raw SYNs and UDP echoes are lost at the timeout, connect() gives up at
// the kernel's first SYN retransmission, and no reply is invented.
func TestNetnsTCPProbesThatGoUnansweredAreLost(t *testing.T) {
	tb := newTestbed(t)
	tb.client.Route("10.79.0.0/24", "via", serverIP4)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	raw := tb.kindProber(t, SocketRaw, 300*time.Millisecond, reflector(t, "tcp:10.79.0.5:443"), reflector(t, "udp:10.79.0.6:7"))
	// With a 3 s timeout, connect() losses within 2.5 s show that it gives
	// up at the kernel's first SYN retransmission (1 s): a handshake
	// completed by a resent SYN would read as a second of delay.
	conn := tb.kindProber(t, SocketDatagram, 3*time.Second, reflector(t, "tcp:10.79.0.7:443"))
	go raw.Run(ctx)
	go conn.Run(ctx)
	getRaw, getConn := collect(raw), collect(conn)
	time.Sleep(2500 * time.Millisecond)
	for name, samples := range map[string][]Sample{"raw and udp": getRaw(time.Time{}), "connect": getConn(time.Time{})} {
		lost := map[netip.Addr]int{}
		for _, s := range samples {
			if s.Kind != KindLost {
				t.Errorf("%s: %+v, want only losses", name, s)
			}
			lost[s.Reflector]++
		}
		t.Logf("%s: lost %v", name, lost)
		if len(lost) == 0 {
			t.Errorf("%s: no probe was reported lost", name)
		}
		for a, n := range lost {
			if n < 5 {
				t.Errorf("%s: only %d losses for %s", name, n, a)
			}
		}
	}
}
