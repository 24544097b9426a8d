// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/shape"
)

// pinger sends ICMP echo requests from a raw socket in a namespace.
type pinger struct {
	t    *testing.T
	conn *icmp.PacketConn
	seq  int
}

func (p *pinger) ping(dst string) bool {
	p.t.Helper()
	p.seq++
	msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 0x4d4b, Seq: p.seq, Data: []byte("macake")}}
	b, err := msg.Marshal(nil)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.conn.WriteTo(b, &net.IPAddr{IP: net.ParseIP(dst)}); err != nil {
		p.t.Fatalf("ping %s: %v", dst, err)
	}
	buf := make([]byte, 1500)
	p.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		n, from, err := p.conn.ReadFrom(buf)
		if err != nil {
			return false
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply || from.String() != dst {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.Seq == p.seq {
			return true
		}
	}
}

// newPinger opens a raw ICMP socket in the client namespace of a
// quietLink.
func newPinger(t *testing.T, client *netns.Namespace) *pinger {
	t.Helper()
	var c *icmp.PacketConn
	if err := client.Do(func() (err error) {
		c, err = icmp.ListenPacket("ip4:icmp", "10.77.0.1")
		return err
	}); err != nil {
		t.Fatalf("raw ICMP socket: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &pinger{t: t, conn: c}
}

// quietLink joins a client namespace (wan0, 10.77.0.1) to a server
// namespace (10.77.0.2 and 10.77.0.3): a quiet link, without IPv6 (no DAD,
// MLD or router solicitations) and with static neighbours (no ARP), so the
// qdisc counters count only the test's packets.
func quietLink(t *testing.T) (client, server *netns.Namespace) {
	t.Helper()
	lab := netns.New(t, "tcq")
	client, server = lab.Namespace("c"), lab.Namespace("s")
	for _, ns := range []*netns.Namespace{client, server} {
		// Before the veth exists, so that it never gets IPv6.
		ns.Sysctl("net.ipv6.conf.default.disable_ipv6", "1")
	}
	lab.Link(client, "wan0", server, "peer0")
	client.AddAddr("wan0", "10.77.0.1/24")
	server.AddAddr("peer0", "10.77.0.2/24")
	server.AddAddr("peer0", "10.77.0.3/24")
	serverMAC, clientMAC := server.HardwareAddr("peer0").String(), client.HardwareAddr("wan0").String()
	for _, a := range []string{"10.77.0.2", "10.77.0.3"} {
		client.IP("neigh", "replace", a, "lladdr", serverMAC, "nud", "permanent", "dev", "wan0")
	}
	server.IP("neigh", "replace", "10.77.0.1", "lladdr", clientMAC, "nud", "permanent", "dev", "peer0")
	return client, server
}

// exemptCounts are the packets that left wan0 past the shaper (bypassed)
// and that came in through the IFB of slot 5 (sentThrough).
type exemptCounts struct{ direct, ifb int64 }

// slot5Counts reads the exemptCounts of the link in slot 5 on wan0.
func slot5Counts(t *testing.T, b *Backend, ks kernelShape) exemptCounts {
	t.Helper()
	return exemptCounts{direct: bypassed(t, b, ks, "wan0"), ifb: sentThrough(t, b, "ifb-macake5")}
}

// wantShapedBothWays fails unless none of the traffic sent between the
// counts before and after (out, its n answers in) bypassed the shaper and
// at least n packets came in through the IFB.
func wantShapedBothWays(t *testing.T, before, after exemptCounts, n int64, out, in string) {
	t.Helper()
	if after.direct != before.direct {
		t.Errorf("%d %s bypassed the shaper", after.direct-before.direct, out)
	}
	if after.ifb-before.ifb < n {
		t.Errorf("only %d %s went through the IFB, want at least %d", after.ifb-before.ifb, in, n)
	}
}

// TestKernelProbeExemptionsBypassTheShaper sends real ICMP through a
// shaped veth: echoes to a reflector leave unshaped (through htb's direct
// queue, or prio's band ahead of CAKE) and their replies never reach the
// IFB, while echoes to any other host are shaped both ways. The
// controller's delay signal must be the bottleneck's queue, not macake's.
func TestKernelProbeExemptionsBypassTheShaper(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		client, _ := quietLink(t)
		b := ks.netlinkBackend(t, client.Name(), execrun.Exec{})
		desired := shape.State{Links: []shape.Link{wanLink("wan0", 5)}} // reflector 10.77.0.2
		apply(t, b, desired)

		p := newPinger(t, client)
		for _, dst := range []string{"10.77.0.2", "10.77.0.3"} {
			if !p.ping(dst) {
				t.Fatalf("no echo reply from %s through the shaper", dst)
			}
		}
		const n = 5
		c0 := slot5Counts(t, b, ks)
		for i := 0; i < n; i++ {
			if !p.ping("10.77.0.2") {
				t.Fatal("no echo reply from the reflector")
			}
		}
		c1 := slot5Counts(t, b, ks)
		if c1.direct-c0.direct != n {
			t.Errorf("%d echoes to the reflector went unshaped on egress, want %d", c1.direct-c0.direct, n)
		}
		if c1.ifb != c0.ifb {
			t.Errorf("%d reflector replies were redirected to the IFB, want 0", c1.ifb-c0.ifb)
		}
		for i := 0; i < n; i++ {
			if !p.ping("10.77.0.3") {
				t.Fatal("no echo reply from the non-reflector")
			}
		}
		c2 := slot5Counts(t, b, ks)
		wantShapedBothWays(t, c1, c2, n, "echoes to a non-reflector", "replies from a non-reflector")
		if _, err := b.Teardown(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestKernelTCPExemptionsBypassTheShaper opens real TCP handshakes through
// a shaped veth: with the reflector tcp:10.77.0.2:443, handshakes to that
// port leave unshaped and their SYN-ACKs never reach the IFB, while
// handshakes to another port of the same host are shaped both ways: the
// exemption is the probe's port, not the host.
func TestKernelTCPExemptionsBypassTheShaper(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		client, server := quietLink(t)
		for _, port := range []string{"443", "80"} {
			l, err := server.Listen(nil, "tcp4", "10.77.0.2:"+port)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			netns.AcceptEach(l, func(c net.Conn) { c.Close() })
		}
		b := ks.netlinkBackend(t, client.Name(), execrun.Exec{})
		link := wanLink("wan0", 5)
		link.Reflectors = []shape.Reflector{{Kind: shape.ProbeTCP, Addr: netip.MustParseAddr("10.77.0.2"), Port: 443}}
		apply(t, b, shape.State{Links: []shape.Link{link}})

		// Each handshake: SYN out, SYN-ACK in, then the ACK and a reset out
		// (linger 0), as the prober's connect()-timed probes do.
		handshakes := func(port string, n int) {
			t.Helper()
			for i := 0; i < n; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				c, err := client.Dial(ctx, nil, "tcp4", "10.77.0.2:"+port)
				cancel()
				if err != nil {
					t.Fatalf("handshake to port %s through the shaper: %v", port, err)
				}
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
		}
		handshakes("443", 1)
		handshakes("80", 1)
		const n = 5
		c0 := slot5Counts(t, b, ks)
		handshakes("443", n)
		c1 := slot5Counts(t, b, ks)
		if c1.direct-c0.direct < n {
			t.Errorf("%d packets of %d handshakes to the reflector's port went unshaped on egress, want at least %d", c1.direct-c0.direct, n, n)
		}
		if c1.ifb != c0.ifb {
			t.Errorf("%d packets from the reflector's port were redirected to the IFB, want 0", c1.ifb-c0.ifb)
		}
		handshakes("80", n)
		c2 := slot5Counts(t, b, ks)
		wantShapedBothWays(t, c1, c2, n, "packets to another port of the reflector", "packets from another port of the reflector")
		if _, err := b.Teardown(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
