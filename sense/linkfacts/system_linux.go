// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// System detects the facts on Linux with rtnetlink: one dump each of
// links, IPv4 and IPv6 routes and neighbours, over a socket opened once
// (in the network namespace of NewSystem's Do).
type System struct {
	opts  SystemOptions
	mu    sync.Mutex
	fd    int
	seq   uint32
	ssids ssidCache
}

// NewSystem opens the netlink socket.
func NewSystem(opts SystemOptions) (*System, error) {
	opts.defaults()
	s := &System{opts: opts, fd: -1}
	err := opts.Do(func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		s.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("link facts: opening netlink socket: %w", err)
	}
	if err := unix.Bind(s.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(s.fd)
		return nil, fmt.Errorf("link facts: binding netlink socket: %w", err)
	}
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return s, nil
}

// Close releases the socket.
func (s *System) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// Facts reads links, default routes and neighbours.
func (s *System) Facts(ctx context.Context) (Facts, error) {
	d, err := s.dumpAll()
	if err != nil {
		return Facts{}, err
	}
	f := assemble(d.ifaces, d.routes, d.neigh, nil)
	if s.opts.ResolveGatewayMAC {
		if gw, ok := DefaultInterface(f); ok && gw.GatewayIP.IsValid() && len(gw.GatewayMAC) == 0 {
			s.nudge(gw.GatewayIP)
			time.Sleep(100 * time.Millisecond)
			if d2, err := s.dumpAll(); err == nil {
				f = assemble(d2.ifaces, d2.routes, d2.neigh, nil)
			}
		}
	}
	if s.opts.SSID {
		f = withSSIDs(f, s.ssids.lookup(ctx, f, s.ssid))
	}
	return f, nil
}

func (s *System) dumpAll() (netlinkDump, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return netlinkDump{}, errors.New("link facts: detector is closed")
	}
	var d netlinkDump
	for _, q := range []struct {
		typ    uint16
		family byte
		size   int
	}{
		{unix.RTM_GETLINK, unix.AF_UNSPEC, unix.SizeofIfInfomsg},
		{unix.RTM_GETROUTE, unix.AF_INET, unix.SizeofRtMsg},
		{unix.RTM_GETROUTE, unix.AF_INET6, unix.SizeofRtMsg},
		{unix.RTM_GETNEIGH, unix.AF_INET, unix.SizeofNdMsg},
		{unix.RTM_GETNEIGH, unix.AF_INET6, unix.SizeofNdMsg},
	} {
		if err := s.dump(&d, q.typ, q.family, q.size); err != nil {
			return netlinkDump{}, fmt.Errorf("link facts: netlink dump %d/%d: %w", q.typ, q.family, err)
		}
	}
	return d, nil
}

func (s *System) dump(d *netlinkDump, typ uint16, family byte, size int) error {
	s.seq++
	req := make([]byte, nlmsgHdrLen+size)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], typ)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], s.seq)
	req[nlmsgHdrLen] = family
	if err := unix.Sendto(s.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(s.fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		done, err := d.add(buf[:n], s.seq)
		if err != nil || done {
			return err
		}
	}
}

// nudge makes the kernel resolve the gateway's MAC by sending it one
// datagram (to the discard port).
func (s *System) nudge(gw netip.Addr) {
	s.opts.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(gw, 9)))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte{0})
		return err
	})
}

func (s *System) ssid(ctx context.Context, iface string) string {
	if _, err := os.Stat(filepath.Join("/sys/class/net", iface, "wireless")); err != nil {
		return ""
	}
	return parseIwLink(output(ctx, s.opts.Runner, "iw", "dev", iface, "link"))
}

// Changes subscribes to rtnetlink's link, address, route and neighbour
// groups; every message is a hint to re-read.
func (s *System) Changes(ctx context.Context) (<-chan struct{}, error) {
	var fd int
	err := s.opts.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("link facts: netlink events: %w", err)
	}
	groups := uint32(unix.RTMGRP_LINK | unix.RTMGRP_NEIGH | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_IPV6_ROUTE)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("link facts: netlink events: %w", err)
	}
	return readEvents(ctx, os.NewFile(uintptr(fd), "netlink"), func([]byte) bool { return true }), nil
}
