// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/net/route"
	"golang.org/x/sys/unix"
)

// System detects the facts on macOS from the routing tables, read with
// sysctl (no root, no cgo): the route dump for default routes (the
// unscoped one is the system's default; RTF_IFSCOPE ones are the defaults
// of other services, one per interface), and the RTF_LLINFO dump for
// gateway MACs, which is what arp -an reads.
type System struct {
	opts  SystemOptions
	ssids ssidCache

	wifiOnce sync.Once
	wifi     map[string]bool
}

// NewSystem returns the detector.
func NewSystem(opts SystemOptions) (*System, error) {
	opts.defaults()
	return &System{opts: opts}, nil
}

// Close releases nothing: every read is a sysctl.
func (s *System) Close() error { return nil }

// Facts reads interfaces, default routes and the ARP/NDP caches.
func (s *System) Facts(ctx context.Context) (Facts, error) {
	f, err := s.read()
	if err != nil {
		return Facts{}, err
	}
	if s.opts.ResolveGatewayMAC {
		if gw, ok := DefaultInterface(f); ok && gw.GatewayIP.IsValid() && len(gw.GatewayMAC) == 0 {
			nudge(gw.GatewayIP)
			time.Sleep(100 * time.Millisecond)
			if f2, err := s.read(); err == nil {
				f = f2
			}
		}
	}
	if s.opts.SSID {
		f = withSSIDs(f, s.ssids.lookup(ctx, f, s.ssid))
	}
	return f, nil
}

func (s *System) read() (Facts, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return Facts{}, fmt.Errorf("link facts: listing interfaces: %w", err)
	}
	var ifaces []osInterface
	for _, i := range ifs {
		ifaces = append(ifaces, osInterface{Index: i.Index, Name: i.Name, Up: i.Flags&net.FlagUp != 0 && i.Flags&net.FlagRunning != 0, Loopback: i.Flags&net.FlagLoopback != 0})
	}
	msgs, err := rib(unix.AF_UNSPEC, route.RIBTypeRoute, 0)
	if err != nil {
		return Facts{}, fmt.Errorf("link facts: route dump: %w", err)
	}
	routes := defaultRoutes(msgs)
	var neigh []osNeighbor
	for _, af := range []int{unix.AF_INET, unix.AF_INET6} {
		msgs, err := rib(af, unix.NET_RT_FLAGS, unix.RTF_LLINFO)
		if err != nil {
			continue // an empty cache is not an error worth failing on
		}
		neigh = append(neigh, neighbors(msgs)...)
	}
	return assemble(ifaces, routes, neigh, nil), nil
}

// rib fetches a routing sysctl and parses it with parseRIB (portable, so
// tested on Linux from recorded bytes; it never panics on odd messages,
// which x/net/route's parser has done: tailscale#14201).
func rib(af int, typ route.RIBType, arg int) ([]ribMessage, error) {
	b, err := route.FetchRIB(af, typ, arg)
	if err != nil {
		return nil, err
	}
	return parseRIB(b)
}

func nudge(gw netip.Addr) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(gw, 9)))
	if err != nil {
		return
	}
	c.Write([]byte{0})
	c.Close()
}

// ssid tries ipconfig (redacted from macOS 15.6) and networksetup (empty
// from 15.0) on Wi-Fi devices only.
func (s *System) ssid(ctx context.Context, iface string) string {
	s.wifiOnce.Do(func() {
		s.wifi = map[string]bool{}
		for _, d := range parseHardwarePorts(output(ctx, s.opts.Runner, "/usr/sbin/networksetup", "-listallhardwareports")) {
			s.wifi[d] = true
		}
	})
	if !s.wifi[iface] {
		return ""
	}
	if v := parseIPConfigSummary(output(ctx, s.opts.Runner, "/usr/sbin/ipconfig", "getsummary", iface)); v != "" {
		return v
	}
	return parseAirportNetwork(output(ctx, s.opts.Runner, "/usr/sbin/networksetup", "-getairportnetwork", iface))
}

// Route message types that say nothing about the link: lookups that
// failed (RTM_MISS fires on every unroutable packet and scales with
// traffic), answers to RTM_GET, and multicast membership.
const (
	rtmGet      = 0x4
	rtmLosing   = 0x5
	rtmMiss     = 0x7
	rtmNewMaddr = 0xf
	rtmDelMaddr = 0x10
	rtmGet2     = 0x14
)

// Changes reads a PF_ROUTE socket; every route, address or interface
// message is a hint to re-read.
func (s *System) Changes(ctx context.Context) (<-chan struct{}, error) {
	fd, err := unix.Socket(unix.AF_ROUTE, unix.SOCK_RAW, unix.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("link facts: routing socket: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("link facts: routing socket: %w", err)
	}
	return readEvents(ctx, os.NewFile(uintptr(fd), "route"), func(b []byte) bool {
		if len(b) < 4 {
			return false
		}
		switch b[3] {
		case rtmGet, rtmLosing, rtmMiss, rtmNewMaddr, rtmDelMaddr, rtmGet2:
			return false
		}
		return true
	}), nil
}
