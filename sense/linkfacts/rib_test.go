// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/macake/macake/config"
)

// The fixtures below are built byte by byte from darwin's documented
// layouts (no recording from a Mac was available): struct rt_msghdr in
// <net/route.h> (92 bytes: msglen u16, version u8, type u8, index u16,
// 2 bytes padding, flags i32, addrs i32, pid, seq, errno, use, inits,
// then struct rt_metrics of 14 u32), followed by one socket address per
// bit of rtm_addrs, each padded to 4 bytes (ROUNDUP; a zero length takes
// 4); sockaddr_in (16 bytes: len, family, port, addr), sockaddr_in6 (28:
// len, family, port, flowinfo, addr, scope id) and sockaddr_dl (len,
// family, index u16, type, nlen, alen, slen, name, address; at least 20).
// What `netstat -rn` and `arp -an` show for them is in the comments.

const (
	rtmGetType       = 0x4 // RTM_GET: what NET_RT_DUMP and NET_RT_FLAGS return
	rtmIfInfo        = 0xe // RTM_IFINFO: another header, skipped by length
	rtfUp            = 0x1
	rtfStatic        = 0x800
	rtfHost          = 0x4
	rtfCloning       = 0x100
	rtaDarwinDst     = 1 << rtaxDst
	rtaDarwinGateway = 1 << rtaxGateway
	rtaDarwinNetmask = 1 << rtaxNetmask
	ifIndexEn0       = 4
	ifIndexEn5       = 7
	ifIndexUtun      = 12
)

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// rtMsg is one routing message: the header and the socket addresses in
// RTAX order.
func rtMsg(typ byte, index uint16, flags, addrs uint32, sockaddrs ...[]byte) []byte {
	b := make([]byte, rtMsghdrLen)
	b[2], b[3] = rtmVersion, typ
	binary.LittleEndian.PutUint16(b[4:], index)
	binary.LittleEndian.PutUint32(b[8:], flags)
	binary.LittleEndian.PutUint32(b[12:], addrs)
	binary.LittleEndian.PutUint32(b[16:], 0) // rtm_pid: the kernel
	for _, sa := range sockaddrs {
		b = append(b, pad4(sa)...)
	}
	binary.LittleEndian.PutUint16(b[0:], uint16(len(b)))
	return b
}

func sin(ip string) []byte {
	b := make([]byte, 16)
	b[0], b[1] = 16, afInet
	a := netip.MustParseAddr(ip).As4()
	copy(b[4:], a[:])
	return b
}

// sin6 writes a as the kernel does: a link-local address carries the
// interface index in bytes 2 and 3.
func sin6(ip string, scope uint16) []byte {
	b := make([]byte, 28)
	b[0], b[1] = 28, afInet6
	a := netip.MustParseAddr(ip).As16()
	if scope != 0 {
		binary.BigEndian.PutUint16(a[2:], scope)
	}
	copy(b[8:], a[:])
	binary.LittleEndian.PutUint32(b[24:], uint32(scope))
	return b
}

func sdl(index uint16, name, mac string) []byte {
	var hw []byte
	if mac != "" {
		hw, _ = net.ParseMAC(mac)
	}
	l := max(20, 8+len(name)+len(hw))
	b := make([]byte, l)
	b[0], b[1] = byte(l), afLink
	binary.LittleEndian.PutUint16(b[2:], index)
	b[4] = 6 // IFT_ETHER
	b[5], b[6] = byte(len(name)), byte(len(hw))
	copy(b[8:], name)
	copy(b[8+len(name):], hw)
	return b
}

// mask is a netmask in the kernel's compact form: only the significant
// bytes after the length and family (0 bytes: length 0, all zero).
func mask(bytes ...byte) []byte {
	if len(bytes) == 0 {
		return []byte{0}
	}
	return append([]byte{byte(4 + len(bytes)), 0xff, 0, 0}, bytes...)
}

func cat(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, m...)
	}
	return b
}

// routeDump is a NET_RT_DUMP of a Mac on Wi-Fi (en0) with Ethernet (en5)
// as a second service and a VPN (utun3) that routes 0/1 and 128/1:
//
//	default        192.168.1.1      UGScg   en0
//	default        10.0.0.1         UGScIg  en5
//	0/1            10.8.0.1         UGSc    utun3
//	10.8/16        10.8.0.1         UGSc    utun3
//	192.168.1      link#4           UCS     en0
//	default        fe80::1%en0      UGcg    en0
var routeDump = cat(
	rtMsg(rtmGetType, ifIndexEn0, rtfUp|rtfGateway|rtfStatic, rtaDarwinDst|rtaDarwinGateway|rtaDarwinNetmask, sin("0.0.0.0"), sin("192.168.1.1"), mask()),
	rtMsg(rtmIfInfo, ifIndexEn0, 0, 0), // not a route message: skipped
	rtMsg(rtmGetType, ifIndexEn5, rtfUp|rtfGateway|rtfStatic|rtfIfScope, rtaDarwinDst|rtaDarwinGateway|rtaDarwinNetmask, sin("0.0.0.0"), sin("10.0.0.1"), mask()),
	rtMsg(rtmGetType, ifIndexUtun, rtfUp|rtfGateway|rtfStatic, rtaDarwinDst|rtaDarwinGateway|rtaDarwinNetmask, sin("0.0.0.0"), sin("10.8.0.1"), mask(0x80)),
	rtMsg(rtmGetType, ifIndexUtun, rtfUp|rtfGateway|rtfStatic, rtaDarwinDst|rtaDarwinGateway|rtaDarwinNetmask, sin("10.8.0.0"), sin("10.8.0.1"), mask(0xff, 0xff)),
	rtMsg(rtmGetType, ifIndexEn0, rtfUp|rtfCloning|rtfStatic, rtaDarwinDst|rtaDarwinGateway|rtaDarwinNetmask, sin("192.168.1.0"), sdl(ifIndexEn0, "", ""), mask(0xff, 0xff, 0xff)),
	rtMsg(rtmGetType, ifIndexEn0, rtfUp|rtfGateway, rtaDarwinDst|rtaDarwinGateway|rtaDarwinNetmask, sin6("::", 0), sin6("fe80::1", ifIndexEn0), mask()),
)

// arpDump is a NET_RT_FLAGS dump for RTF_LLINFO over AF_INET:
//
//	? (192.168.1.1) at 74:24:9f:0:0:1 on en0
//	? (192.168.1.23) at (incomplete) on en0
//	? (10.0.0.1) at 0:11:22:33:44:55 on en5
var arpDump = cat(
	rtMsg(rtmGetType, ifIndexEn0, rtfUp|rtfHost|rtfLLInfo, rtaDarwinDst|rtaDarwinGateway, sin("192.168.1.1"), sdl(ifIndexEn0, "", "74:24:9f:00:00:01")),
	rtMsg(rtmGetType, ifIndexEn0, rtfUp|rtfHost|rtfLLInfo, rtaDarwinDst|rtaDarwinGateway, sin("192.168.1.23"), sdl(ifIndexEn0, "", "")),
	rtMsg(rtmGetType, ifIndexEn5, rtfUp|rtfHost|rtfLLInfo, rtaDarwinDst|rtaDarwinGateway, sin("10.0.0.1"), sdl(ifIndexEn5, "en5", "00:11:22:33:44:55")),
)

// ndpDump: the same over AF_INET6 (ndp -an): the router fe80::1%en0.
var ndpDump = rtMsg(rtmGetType, ifIndexEn0, rtfUp|rtfHost|rtfLLInfo, rtaDarwinDst|rtaDarwinGateway, sin6("fe80::1", ifIndexEn0), sdl(ifIndexEn0, "", "74:24:9f:00:00:01"))

func TestDarwinRouteDumpGivesTheDefaultRoutes(t *testing.T) {
	msgs, err := parseRIB(routeDump)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 6 {
		t.Errorf("%d route messages, want the 6 routes (the RTM_IFINFO skipped)", len(msgs))
	}
	got := defaultRoutes(msgs)
	want := []osRoute{
		{Index: ifIndexEn0, Gateway: netip.MustParseAddr("192.168.1.1")},
		{Index: ifIndexEn5, Gateway: netip.MustParseAddr("10.0.0.1"), Scoped: true},
		{Index: ifIndexEn0, Gateway: netip.MustParseAddr("fe80::1")},
	}
	if len(got) != len(want) {
		t.Fatalf("default routes %+v, want %+v (0/1 and 10.8/16 are not defaults)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("default route %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestDarwinLLInfoDumpGivesTheNeighbours(t *testing.T) {
	var neigh []osNeighbor
	for _, dump := range [][]byte{arpDump, ndpDump} {
		msgs, err := parseRIB(dump)
		if err != nil {
			t.Fatal(err)
		}
		neigh = append(neigh, neighbors(msgs)...)
	}
	want := []struct {
		index   int
		ip, mac string
	}{
		{ifIndexEn0, "192.168.1.1", "74:24:9f:00:00:01"},
		{ifIndexEn5, "10.0.0.1", "00:11:22:33:44:55"},
		{ifIndexEn0, "fe80::1", "74:24:9f:00:00:01"},
	}
	if len(neigh) != len(want) {
		t.Fatalf("neighbours %+v; want %d (the incomplete entry left out)", neigh, len(want))
	}
	for i, w := range want {
		if n := neigh[i]; n.Index != w.index || n.IP != netip.MustParseAddr(w.ip) || n.MAC.String() != w.mac {
			t.Errorf("neighbour %d: %d %s %s, want %d %s %s", i, n.Index, n.IP, n.MAC, w.index, w.ip, w.mac)
		}
	}
}

// TestDarwinDumpsAssembleTheFacts runs the whole darwin path after the
// sysctls: the Wi-Fi carries the system default and its gateway's MAC;
// the Ethernet service's scoped default names its gateway but is not the
// default; the VPN's 0/1 does not make utun3 the default.
func TestDarwinDumpsAssembleTheFacts(t *testing.T) {
	routesMsgs, err := parseRIB(routeDump)
	if err != nil {
		t.Fatal(err)
	}
	arp, err := parseRIB(arpDump)
	if err != nil {
		t.Fatal(err)
	}
	ifaces := []osInterface{{Index: 1, Name: "lo0", Up: true, Loopback: true}, {Index: ifIndexEn0, Name: "en0", Up: true}, {Index: ifIndexEn5, Name: "en5", Up: true}, {Index: ifIndexUtun, Name: "utun3", Up: true}}
	f := assemble(ifaces, defaultRoutes(routesMsgs), neighbors(arp), nil)
	got := Describe(f)
	want := "en0 up gw 192.168.1.1 (74:24:9f:00:00:01) default; en5 up gw 10.0.0.1 (00:11:22:33:44:55); utun3 up"
	if got != want {
		t.Errorf("facts\n got %s\nwant %s", got, want)
	}
	if def, ok := DefaultInterface(f); !ok || def.Name != "en0" || !def.GatewayMAC.Equal(config.HardwareAddr{0x74, 0x24, 0x9f, 0, 0, 1}) {
		t.Errorf("default interface %+v", def)
	}
}

func TestParseRIBRejectsTruncatedDumps(t *testing.T) {
	full := rtMsg(rtmGetType, ifIndexEn0, rtfUp|rtfGateway, rtaDarwinDst|rtaDarwinGateway|rtaDarwinNetmask, sin("0.0.0.0"), sin("192.168.1.1"), mask())
	overrun := rtMsg(rtmGetType, ifIndexEn0, rtfUp|rtfGateway, rtaDarwinDst|rtaDarwinGateway, sin("0.0.0.0"))
	overrun[rtMsghdrLen] = 64 // a sockaddr claiming more than the message holds
	shortHeader := rtMsg(rtmGetType, ifIndexEn0, 0, 0)[:40]
	binaryLen := func(b []byte) []byte { binary.LittleEndian.PutUint16(b, uint16(len(b))); return b }
	badDL := rtMsg(rtmGetType, ifIndexEn0, rtfLLInfo, rtaDarwinDst|rtaDarwinGateway, sin("192.168.1.1"), sdl(ifIndexEn0, "", "74:24:9f:00:00:01"))
	badDL[len(badDL)-20+6] = 40 // alen beyond the sockaddr_dl
	for name, b := range map[string][]byte{
		"cut mid-message":          full[:len(full)-5],
		"cut in the length":        cat(full, []byte{0x5c}),
		"length below the header":  binaryLen(shortHeader),
		"address overruns message": overrun,
		"link address overruns":    badDL,
	} {
		if msgs, err := parseRIB(b); err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%s: %+v, %v; want a truncation error", name, msgs, err)
		}
	}
	if msgs, err := parseRIB(nil); err != nil || len(msgs) != 0 {
		t.Errorf("an empty dump: %v, %v", msgs, err)
	}
}

// FuzzParseRIB: any bytes give messages or an error, never a panic (the
// parser reads what the kernel hands over, which has surprised parsers
// before), and what it finds holds together.
func FuzzParseRIB(f *testing.F) {
	for _, seed := range [][]byte{routeDump, arpDump, ndpDump, routeDump[:100], {}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := parseRIB(b)
		if err != nil {
			return
		}
		for _, n := range neighbors(msgs) {
			if len(n.MAC) != 6 || !n.IP.IsValid() {
				t.Errorf("neighbour %+v", n)
			}
		}
		for _, r := range defaultRoutes(msgs) {
			if !r.Gateway.IsValid() {
				t.Errorf("route %+v", r)
			}
		}
	})
}
