// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestSlowTCPAndUDPReflectorsHoldTheirAnswers: a handshake with the slow
// TCP reflector and an echo from the slow UDP echo take their delay, over
// IPv4 and IPv6 (the namespace's kernel does not answer first), and a SYN
// with a wrong checksum gets no answer.
func TestSlowTCPAndUDPReflectorsHoldTheirAnswers(t *testing.T) {
	if InChild() {
		t.Skip("parent half")
	}
	const delay = 40 * time.Millisecond
	client, server := New(t, "slow").Pair()
	client.Route("default", "via", ServerIP4)
	client.Route("default", "via", ServerIP6)
	server.SlowTCPReflector(delay, ServerDev, "10.77.9.1", "fd77:9::1")
	server.SlowUDPEcho(delay, ServerIP4+":7", "["+ServerIP6+"]:7")

	within := func(what string, d time.Duration) {
		t.Helper()
		if d < delay || d > delay+20*time.Millisecond {
			t.Errorf("%s took %v, want %v and a little", what, d, delay)
		} else {
			t.Logf("%s took %v", what, d)
		}
	}
	for _, addr := range []string{"10.77.9.1:443", "[fd77:9::1]:80"} {
		start := time.Now()
		c, err := client.Dial(t.Context(), nil, "tcp", addr)
		if err != nil {
			t.Fatalf("handshake with %s: %v", addr, err)
		}
		within("a handshake with "+addr, time.Since(start))
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
	for _, addr := range []string{ServerIP4 + ":7", "[" + ServerIP6 + "]:7"} {
		c, err := client.Dial(t.Context(), nil, "udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.SetDeadline(start.Add(time.Second))
		if _, err := c.Write([]byte("echo")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "echo" {
			t.Fatalf("echo from %s: %q, %v", addr, buf[:n], err)
		}
		within("an echo from "+addr, time.Since(start))
		c.Close()
	}

	// Bare SYNs from a raw socket: answered when their checksum is right,
	// ignored when it was computed for another source address.
	pc, err := client.ListenPacket("ip4:tcp", ClientIP4)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	src, dst := netip.MustParseAddr(ClientIP4), netip.MustParseAddr("10.77.9.1")
	for _, c := range []struct {
		sum    netip.Addr
		answer bool
	}{{netip.MustParseAddr("10.77.5.5"), false}, {src, true}} {
		seg := make([]byte, 20)
		binary.BigEndian.PutUint16(seg[0:], 40000)
		binary.BigEndian.PutUint16(seg[2:], 443)
		binary.BigEndian.PutUint32(seg[4:], 1000)
		seg[12], seg[13] = 5<<4, 0x02
		binary.BigEndian.PutUint16(seg[14:], 65535)
		binary.BigEndian.PutUint16(seg[16:], tcpChecksum(c.sum, dst, seg))
		if _, err := pc.WriteTo(seg, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			t.Fatal(err)
		}
		got := false
		pc.SetReadDeadline(time.Now().Add(delay + 200*time.Millisecond))
		buf := make([]byte, 1500)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				break
			}
			if n >= 20 && binary.BigEndian.Uint16(buf[2:]) == 40000 && buf[13] == 0x12 && binary.BigEndian.Uint32(buf[8:]) == 1001 {
				got = true
				break
			}
		}
		if got != c.answer {
			t.Errorf("a SYN checksummed for %v: answered %v, want %v", c.sum, got, c.answer)
		}
	}
}
