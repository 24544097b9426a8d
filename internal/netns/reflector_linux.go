// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// SlowReflector makes the namespace answer ICMP echo requests to addrs
// (IPv4 or IPv6 literals, already on one of its devices) from user space,
// each reply sent delay after its request arrived, instead of from the
// kernel. It is a path of known, fixed delay without
// netem (which this project's CI kernel lacks): a reflector behind it
// looks delay further away, whatever the load. The kernel's own echo
// replies are turned off in the namespace; the responder stops at the
// test's Cleanup.
func (ns *Namespace) SlowReflector(delay time.Duration, addrs ...string) {
	tb := ns.lab.tb
	tb.Helper()
	ns.Sysctl("net.ipv4.icmp_echo_ignore_all", "1")
	ns.Sysctl("net.ipv6.icmp.echo_ignore_all", "1")
	v4 := struct {
		network string
		proto   int
		request icmp.Type
		reply   icmp.Type
	}{"ip4:icmp", 1, ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply}
	v6 := v4
	v6.network, v6.proto, v6.request, v6.reply = "ip6:ipv6-icmp", 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	for _, addr := range addrs {
		fam := v4
		if strings.Contains(addr, ":") {
			fam = v6
		}
		// Bound to the reflector's address, the socket sees only requests
		// to it and its replies come from it (unbound, they would leave
		// from the outgoing device's address, which no prober accepts).
		var pc net.PacketConn
		if err := ns.Do(func() (err error) {
			pc, err = net.ListenPacket(fam.network, addr)
			return err
		}); err != nil {
			tb.Fatalf("slow reflector in %s: %v", ns.name, err)
		}
		answerEach(tb, pc, delay, func(in []byte) []byte {
			m, err := icmp.ParseMessage(fam.proto, in)
			if err != nil || m.Type != fam.request {
				return nil
			}
			// A raw IPv4 socket must carry the checksum (Marshal computes
			// it); for ICMPv6 the kernel fills it in.
			out, err := (&icmp.Message{Type: fam.reply, Body: m.Body}).Marshal(nil)
			if err != nil {
				return nil
			}
			return out
		})
	}
}

// SlowUDPEcho sends every datagram to addrs ("IP:port", on one of the
// namespace's devices) back to its sender, delay after it arrived (at
// once for 0): an RFC 862 echo service at the end of a path of known,
// fixed delay. It stops at the test's Cleanup.
func (ns *Namespace) SlowUDPEcho(delay time.Duration, addrs ...string) {
	tb := ns.lab.tb
	tb.Helper()
	for _, addr := range addrs {
		pc, err := ns.ListenPacket("udp", addr)
		if err != nil {
			tb.Fatalf("UDP echo in %s: %v", ns.name, err)
		}
		answerEach(tb, pc, delay, bytes.Clone)
	}
}

// answerEach hands every packet pc receives to answer, and sends what
// answer returns (nil: nothing) back to the packet's sender delay after it
// arrived. It closes pc, and so stops, at the test's Cleanup.
func answerEach(tb testing.TB, pc net.PacketConn, delay time.Duration, answer func(in []byte) []byte) {
	tb.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return // closed at Cleanup
			}
			out := answer(buf[:n])
			if out == nil {
				continue
			}
			time.AfterFunc(delay, func() { pc.WriteTo(out, from) })
		}
	}()
}
