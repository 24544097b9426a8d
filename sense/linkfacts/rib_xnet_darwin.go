// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/net/route"
	"golang.org/x/sys/unix"
)

// RIBComparison is what CompareWithXNetRoute found.
type RIBComparison struct {
	// Messages is how many route messages both parsers read.
	Messages int
	// Disagreements are messages (or whole dumps) the two read otherwise,
	// or that macake's parser refused.
	Disagreements []string
	// Uncompared are dumps x/net/route itself could not parse.
	Uncompared []string
}

// CompareWithXNetRoute fetches the routing dumps the link facts read
// (every route; the IPv4 and IPv6 neighbour tables) and parses each with
// macake's portable parser and with golang.org/x/net/route, comparing
// message counts, interface indexes, flags and addresses. `macake
// selftest` and a darwin test run it.
func CompareWithXNetRoute() (c RIBComparison, err error) {
	for _, d := range []struct {
		name string
		af   int
		typ  route.RIBType
		arg  int
	}{
		{"routes", unix.AF_UNSPEC, route.RIBTypeRoute, 0},
		{"IPv4 neighbours", unix.AF_INET, unix.NET_RT_FLAGS, unix.RTF_LLINFO},
		{"IPv6 neighbours", unix.AF_INET6, unix.NET_RT_FLAGS, unix.RTF_LLINFO},
	} {
		b, err := route.FetchRIB(d.af, d.typ, d.arg)
		if err != nil {
			return c, fmt.Errorf("fetching the %s dump: %w", d.name, err)
		}
		ours, err := parseRIB(b)
		if err != nil {
			c.Disagreements = append(c.Disagreements, fmt.Sprintf("%s: macake cannot parse the dump: %v", d.name, err))
			continue
		}
		theirs, err := route.ParseRIB(d.typ, b)
		if err != nil {
			c.Uncompared = append(c.Uncompared, fmt.Sprintf("%s: x/net/route cannot parse the dump: %v", d.name, err))
			continue
		}
		var rms []*route.RouteMessage
		for _, m := range theirs {
			if rm, ok := m.(*route.RouteMessage); ok {
				rms = append(rms, rm)
			}
		}
		if len(rms) != len(ours) {
			c.Disagreements = append(c.Disagreements, fmt.Sprintf("%s: %d messages, x/net/route %d", d.name, len(ours), len(rms)))
			continue
		}
		c.Messages += len(ours)
		for i, rm := range rms {
			c.Disagreements = append(c.Disagreements, compareMessage(d.name, i, ours[i], rm)...)
		}
	}
	return c, nil
}

func compareMessage(dump string, i int, m ribMessage, rm *route.RouteMessage) []string {
	var out []string
	if m.Index != rm.Index || m.Flags != rm.Flags {
		out = append(out, fmt.Sprintf("%s message %d: index %d flags %#x, x/net/route %d %#x", dump, i, m.Index, m.Flags, rm.Index, rm.Flags))
	}
	for ax := range min(len(rm.Addrs), rtaxMax) {
		var same bool
		var theirs string
		switch a := rm.Addrs[ax].(type) {
		case *route.Inet4Addr:
			same, theirs = !m.Addrs[ax].IP.IsValid() || m.Addrs[ax].IP == netip.AddrFrom4(a.IP), netip.AddrFrom4(a.IP).String()
		case *route.Inet6Addr:
			same, theirs = !m.Addrs[ax].IP.IsValid() || m.Addrs[ax].IP == netip.AddrFrom16(a.IP), netip.AddrFrom16(a.IP).String()
		case *route.LinkAddr:
			same, theirs = len(a.Addr) != 6 || m.Addrs[ax].MAC.String() == net.HardwareAddr(a.Addr).String(), net.HardwareAddr(a.Addr).String()
		default:
			same = true
		}
		if !same {
			out = append(out, fmt.Sprintf("%s message %d address %d: %s%s, x/net/route %s", dump, i, ax, m.Addrs[ax].IP, m.Addrs[ax].MAC, theirs))
		}
	}
	return out
}
