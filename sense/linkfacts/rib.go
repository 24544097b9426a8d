// SPDX-License-Identifier: Apache-2.0

package linkfacts

// The darwin routing-table dumps (sysctl CTL_NET, PF_ROUTE, 0, af,
// NET_RT_DUMP or NET_RT_FLAGS) are parsed here, untagged, so that Linux
// tests run the parser and the selection of default routes and gateway
// MACs on recorded or handcrafted bytes (golang.org/x/net/route builds
// only on the BSDs). Layouts are darwin's <net/route.h>, <sys/socket.h>,
// <netinet/in.h>, <netinet6/in6.h> and <net/if_dl.h>; every Mac macOS
// supports is little-endian.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// Darwin constants, copied because x/sys/unix defines them only when
// building for darwin.
const (
	rtmVersion = 5 // RTM_VERSION

	rtfGateway = 0x2       // RTF_GATEWAY
	rtfLLInfo  = 0x400     // RTF_LLINFO
	rtfIfScope = 0x1000000 // RTF_IFSCOPE

	rtaxDst     = 0 // RTAX_DST
	rtaxGateway = 1 // RTAX_GATEWAY
	rtaxNetmask = 2 // RTAX_NETMASK
	rtaxMax     = 8 // RTAX_MAX

	afInet  = 2  // AF_INET
	afLink  = 18 // AF_LINK
	afInet6 = 30 // AF_INET6

	// rtMsghdrLen is sizeof(struct rt_msghdr): msglen u16, version u8,
	// type u8, index u16, (2 bytes padding), flags, addrs, pid, seq,
	// errno, use (int32 each), inits u32, rt_metrics (14 × u32).
	rtMsghdrLen = 92
)

// ribMessage is one route message of a dump, reduced to what the link
// facts need.
type ribMessage struct {
	Type  int
	Index int // rtm_index: the outgoing interface
	Flags int // RTF_*
	Addrs [rtaxMax]ribAddr
}

// ribAddr is one socket address of a route message.
type ribAddr struct {
	// Present is true when the message carries this address (rtm_addrs).
	Present bool
	Family  int
	// IP is set for AF_INET and AF_INET6 (without darwin's embedded
	// scope); MAC for AF_LINK with a 6-byte address.
	IP  netip.Addr
	MAC net.HardwareAddr
	// Zero is true when every byte after the length and family is zero;
	// a netmask of length 0 (the kernel's compact form) is zero too.
	Zero bool
}

var errShortRIB = errors.New("routing message truncated")

// parseRIB splits a route dump into messages. Messages of other types or
// versions are skipped by their length, as the kernel may add them; a
// message that does not fit, or whose addresses overrun it, is an error
// (the dump is then not trusted as a whole).
func parseRIB(b []byte) ([]ribMessage, error) {
	var msgs []ribMessage
	for off := 0; len(b) > 0; {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w at byte %d: %d bytes left", errShortRIB, off, len(b))
		}
		n := int(binary.LittleEndian.Uint16(b[0:2]))
		if n < 4 || n > len(b) {
			return nil, fmt.Errorf("%w at byte %d: length %d, %d bytes left", errShortRIB, off, n, len(b))
		}
		m := b[:n]
		b, off = b[n:], off+n
		if int(m[2]) != rtmVersion || !isRouteMessageType(int(m[3])) {
			continue
		}
		if n < rtMsghdrLen {
			return nil, fmt.Errorf("%w at byte %d: a type %d message of %d bytes", errShortRIB, off-n, m[3], n)
		}
		msg := ribMessage{
			Type:  int(m[3]),
			Index: int(binary.LittleEndian.Uint16(m[4:6])),
			Flags: int(int32(binary.LittleEndian.Uint32(m[8:12]))),
		}
		present := binary.LittleEndian.Uint32(m[12:16])
		rest := m[rtMsghdrLen:]
		for i := range rtaxMax {
			if present&(1<<i) == 0 {
				continue
			}
			a, used, err := parseSockaddr(rest)
			if err != nil {
				return nil, fmt.Errorf("routing message at byte %d, address %d: %w", off-n, i, err)
			}
			msg.Addrs[i] = a
			rest = rest[used:]
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// isRouteMessageType: the types that carry a struct rt_msghdr (RTM_ADD
// to RTM_LOCK, and RTM_RESOLVE); the others have other headers.
func isRouteMessageType(t int) bool { return t >= 0x1 && t <= 0x8 || t == 0xb }

// parseSockaddr reads one socket address and returns how many bytes it
// takes in the message: its length rounded up to 4, and 4 for length 0
// (darwin's ROUNDUP).
func parseSockaddr(b []byte) (ribAddr, int, error) {
	if len(b) < 1 {
		return ribAddr{}, 0, errShortRIB
	}
	l := int(b[0])
	used := 4
	if l > 0 {
		used = (l + 3) &^ 3
	}
	if l > len(b) {
		return ribAddr{}, 0, fmt.Errorf("%w: a %d-byte address with %d bytes left", errShortRIB, l, len(b))
	}
	used = min(used, len(b)) // the last address may lack its padding
	a := ribAddr{Present: true, Zero: true}
	if l >= 2 {
		a.Family = int(b[1])
		a.Zero = !slices.ContainsFunc(b[2:l], func(c byte) bool { return c != 0 })
	}
	sa := b[:l]
	switch a.Family {
	case afInet:
		if l >= 8 {
			a.IP = netip.AddrFrom4([4]byte(sa[4:8]))
		}
	case afInet6:
		if l >= 24 {
			ip := [16]byte(sa[8:24])
			if ip[0] == 0xfe && ip[1]&0xc0 == 0x80 || ip[0] == 0xff && (ip[1]&0x0f == 0x01 || ip[1]&0x0f == 0x02) {
				// The KAME stack embeds the interface index in bytes 2
				// and 3 of link-local addresses inside the kernel.
				ip[2], ip[3] = 0, 0
			}
			a.IP = netip.AddrFrom16(ip)
		}
	case afLink:
		// sockaddr_dl: len, family, index u16, type, nlen, alen, slen,
		// then the name and the link-layer address.
		if l >= 8 {
			nlen, alen := int(sa[5]), int(sa[6])
			if 8+nlen+alen > l {
				return ribAddr{}, 0, fmt.Errorf("%w: link address of %d+%d bytes in a %d-byte sockaddr_dl", errShortRIB, nlen, alen, l)
			}
			if alen == 6 {
				a.MAC = net.HardwareAddr(slices.Clone(sa[8+nlen : 8+nlen+alen]))
			}
		}
	}
	return a, used, nil
}

// defaultRoutes picks the default routes out of a route dump: gateway
// routes to the zero destination with a zero (or absent) netmask and an
// IP gateway. The unscoped one is the system's default; RTF_IFSCOPE ones
// are other services' defaults, one per interface.
func defaultRoutes(msgs []ribMessage) []osRoute {
	var routes []osRoute
	for _, m := range msgs {
		dst, mask, gw := m.Addrs[rtaxDst], m.Addrs[rtaxNetmask], m.Addrs[rtaxGateway]
		if m.Flags&rtfGateway == 0 || !dst.IP.IsValid() || !dst.Zero || mask.Present && !mask.Zero || !gw.IP.IsValid() {
			continue
		}
		routes = append(routes, osRoute{Index: m.Index, Gateway: gw.IP, Scoped: m.Flags&rtfIfScope != 0})
	}
	return routes
}

// neighbors picks the ARP/NDP entries out of an RTF_LLINFO dump: an IP
// destination whose gateway is a 6-byte link-layer address.
func neighbors(msgs []ribMessage) []osNeighbor {
	var neigh []osNeighbor
	for _, m := range msgs {
		dst, gw := m.Addrs[rtaxDst], m.Addrs[rtaxGateway]
		if !dst.IP.IsValid() || gw.Family != afLink || len(gw.MAC) != 6 {
			continue
		}
		neigh = append(neigh, osNeighbor{Index: m.Index, IP: dst.IP, MAC: gw.MAC})
	}
	return neigh
}
