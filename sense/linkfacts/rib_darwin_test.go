// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/net/route"
	"golang.org/x/sys/unix"
)

// TestParseRIBAgreesWithXNetRoute checks parseRIB against x/net/route on
// this Mac's live dumps (CI runs Linux, so this runs only on a Mac; the
// Linux tests use bytes built from the documented layouts).
func TestParseRIBAgreesWithXNetRoute(t *testing.T) {
	for _, d := range []struct {
		af  int
		typ route.RIBType
		arg int
	}{{unix.AF_UNSPEC, route.RIBTypeRoute, 0}, {unix.AF_INET, unix.NET_RT_FLAGS, unix.RTF_LLINFO}, {unix.AF_INET6, unix.NET_RT_FLAGS, unix.RTF_LLINFO}} {
		b, err := route.FetchRIB(d.af, d.typ, d.arg)
		if err != nil {
			t.Fatal(err)
		}
		ours, err := parseRIB(b)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := route.ParseRIB(d.typ, b)
		if err != nil {
			t.Skipf("x/net/route cannot parse this dump: %v", err)
		}
		var rms []*route.RouteMessage
		for _, m := range theirs {
			if rm, ok := m.(*route.RouteMessage); ok {
				rms = append(rms, rm)
			}
		}
		if len(rms) != len(ours) {
			t.Fatalf("dump %+v: %d messages, x/net/route %d", d, len(ours), len(rms))
		}
		for i, rm := range rms {
			m := ours[i]
			if m.Index != rm.Index || m.Flags != rm.Flags {
				t.Errorf("message %d: index %d flags %#x, x/net/route %d %#x", i, m.Index, m.Flags, rm.Index, rm.Flags)
			}
			for ax := range min(len(rm.Addrs), rtaxMax) {
				switch a := rm.Addrs[ax].(type) {
				case *route.Inet4Addr:
					if m.Addrs[ax].IP.IsValid() && m.Addrs[ax].IP != netip.AddrFrom4(a.IP) {
						t.Errorf("message %d address %d: %s, x/net/route %v", i, ax, m.Addrs[ax].IP, a.IP)
					}
				case *route.Inet6Addr:
					if m.Addrs[ax].IP.IsValid() && m.Addrs[ax].IP != netip.AddrFrom16(a.IP) {
						t.Errorf("message %d address %d: %s, x/net/route %v", i, ax, m.Addrs[ax].IP, a.IP)
					}
				case *route.LinkAddr:
					if len(a.Addr) == 6 && m.Addrs[ax].MAC.String() != net.HardwareAddr(a.Addr).String() {
						t.Errorf("message %d address %d: %s, x/net/route %v", i, ax, m.Addrs[ax].MAC, net.HardwareAddr(a.Addr))
					}
				}
			}
		}
	}
}
