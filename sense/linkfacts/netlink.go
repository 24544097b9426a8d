// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// rtnetlink message parsing, untagged so that it is tested and fuzzed on
// every OS. Netlink uses the host's byte order.

const (
	nlmsgHdrLen = 16
	nlmsgDone   = 3
	nlmsgError  = 2

	rtmNewLink  = 16
	rtmNewRoute = 24
	rtmNewNeigh = 28

	iflaIfname = 3

	rtaDst      = 1
	rtaOif      = 4
	rtaGateway  = 5
	rtaPriority = 6
	rtaTable    = 15

	ndaDst    = 1
	ndaLladdr = 2

	rtTableMain   = 254
	rtnUnicast    = 1
	iffUp         = 0x1
	iffLoopback   = 0x8
	iffRunning    = 0x40
	iffLowerUp    = 0x10000
	nudIncomplete = 0x01
	nudFailed     = 0x20
)

var errNetlinkTruncated = errors.New("netlink: truncated message")

type nlMsg struct {
	typ  uint16
	seq  uint32
	data []byte
}

// parseNetlink splits a buffer of netlink messages.
func parseNetlink(b []byte) ([]nlMsg, error) {
	var out []nlMsg
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b))
		if l < nlmsgHdrLen || l > len(b) {
			return out, errNetlinkTruncated
		}
		out = append(out, nlMsg{typ: binary.NativeEndian.Uint16(b[4:]), seq: binary.NativeEndian.Uint32(b[8:]), data: b[nlmsgHdrLen:l]})
		b = b[min(align4(l), len(b)):]
	}
	if len(b) != 0 {
		return out, errNetlinkTruncated
	}
	return out, nil
}

func align4(n int) int { return (n + 3) &^ 3 }

// attrs splits rtattrs into type -> value.
func attrs(b []byte) (map[uint16][]byte, error) {
	m := map[uint16][]byte{}
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			return m, errNetlinkTruncated
		}
		m[binary.NativeEndian.Uint16(b[2:])&0x3fff] = b[4:l]
		b = b[min(align4(l), len(b)):]
	}
	return m, nil
}

// netlinkError decodes an NLMSG_ERROR payload (errno 0 is an ACK).
func netlinkError(data []byte) error {
	if len(data) < 4 {
		return errNetlinkTruncated
	}
	if e := int32(binary.NativeEndian.Uint32(data)); e != 0 {
		return fmt.Errorf("netlink: error %d", -e)
	}
	return nil
}

// collect appends to list what parse reads from a message's data, when
// it is one to keep (a default route of the main table, a neighbour with
// a usable link-layer address); a message it cannot read fails the dump.
func collect[T any](list *[]T, parse func([]byte) (T, bool, error), data []byte) error {
	v, ok, err := parse(data)
	if err == nil && ok {
		*list = append(*list, v)
	}
	return err
}

// parseLink reads an RTM_NEWLINK message (struct ifinfomsg, 16 bytes).
func parseLink(data []byte) (osInterface, error) {
	if len(data) < 16 {
		return osInterface{}, errNetlinkTruncated
	}
	flags := binary.NativeEndian.Uint32(data[8:])
	a, err := attrs(data[16:])
	if err != nil {
		return osInterface{}, err
	}
	name := a[iflaIfname]
	if n := len(name); n > 0 && name[n-1] == 0 {
		name = name[:n-1]
	}
	return osInterface{
		Index:    int(int32(binary.NativeEndian.Uint32(data[4:]))),
		Name:     string(name),
		Up:       flags&iffUp != 0 && flags&iffRunning != 0,
		Loopback: flags&iffLoopback != 0,
	}, nil
}

// parseRoute reads an RTM_NEWROUTE message (struct rtmsg, 12 bytes) and
// returns it when it is a unicast default route of the main table through
// one interface, with a gateway or device-only (PPPoE, WireGuard).
func parseRoute(data []byte) (osRoute, bool, error) {
	if len(data) < 12 {
		return osRoute{}, false, errNetlinkTruncated
	}
	family, dstLen, table, typ := data[0], data[1], uint32(data[4]), data[7]
	a, err := attrs(data[12:])
	if err != nil {
		return osRoute{}, false, err
	}
	if t, ok := a[rtaTable]; ok && len(t) >= 4 {
		table = binary.NativeEndian.Uint32(t)
	}
	if dstLen != 0 || table != rtTableMain || typ != rtnUnicast {
		return osRoute{}, false, nil
	}
	gw, _ := ipAttr(family, a[rtaGateway])
	oif := a[rtaOif]
	if len(oif) < 4 {
		return osRoute{}, false, nil // e.g. a multipath default
	}
	r := osRoute{Index: int(int32(binary.NativeEndian.Uint32(oif))), Gateway: gw, IPv4: family == 2}
	if p := a[rtaPriority]; len(p) >= 4 {
		r.Metric = int(binary.NativeEndian.Uint32(p))
	}
	return r, true, nil
}

// parseNeigh reads an RTM_NEWNEIGH message (struct ndmsg, 12 bytes) and
// returns it when it has a usable link-layer address.
func parseNeigh(data []byte) (osNeighbor, bool, error) {
	if len(data) < 12 {
		return osNeighbor{}, false, errNetlinkTruncated
	}
	family := data[0]
	index := int(int32(binary.NativeEndian.Uint32(data[4:])))
	state := binary.NativeEndian.Uint16(data[8:])
	a, err := attrs(data[12:])
	if err != nil {
		return osNeighbor{}, false, err
	}
	ip, ok := ipAttr(family, a[ndaDst])
	mac := a[ndaLladdr]
	if !ok || len(mac) != 6 || state&(nudIncomplete|nudFailed) != 0 {
		return osNeighbor{}, false, nil
	}
	return osNeighbor{Index: index, IP: ip, MAC: net.HardwareAddr(append([]byte(nil), mac...))}, true, nil
}

func ipAttr(family byte, b []byte) (netip.Addr, bool) {
	switch {
	case family == 2 && len(b) == 4: // AF_INET
		return netip.AddrFrom4([4]byte(b)), true
	case family == 10 && len(b) == 16: // AF_INET6
		return netip.AddrFrom16([16]byte(b)), true
	}
	return netip.Addr{}, false
}

// netlinkDump is the parsed content of the three dumps.
type netlinkDump struct {
	ifaces []osInterface
	routes []osRoute
	neigh  []osNeighbor
}

// add parses one buffer of dump replies into d; done reports NLMSG_DONE.
func (d *netlinkDump) add(b []byte, seq uint32) (done bool, err error) {
	msgs, err := parseNetlink(b)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		if m.seq != seq {
			continue // a stale reply to an earlier, abandoned request
		}
		switch m.typ {
		case nlmsgDone:
			return true, nil
		case nlmsgError:
			if err := netlinkError(m.data); err != nil {
				return true, err
			}
			return true, nil
		case rtmNewLink:
			ifi, err := parseLink(m.data)
			if err != nil {
				return false, err
			}
			d.ifaces = append(d.ifaces, ifi)
		case rtmNewRoute:
			if err := collect(&d.routes, parseRoute, m.data); err != nil {
				return false, err
			}
		case rtmNewNeigh:
			if err := collect(&d.neigh, parseNeigh, m.data); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}
