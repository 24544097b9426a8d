// SPDX-License-Identifier: Apache-2.0

//go:build linux || darwin

package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// listenOn returns a Listen function (Config.Listen) whose sockets send
// and receive only through interface ifname (bindToInterface, per OS).
// It opens the same sockets icmp.ListenPacket does, with the binding set
// before the socket is bound to its address: icmp.ListenPacket keeps its
// descriptor to itself, so the option could not be set afterwards.
//
// A socket bound to an interface routes every probe out of it whatever
// the default route says, and is handed only the replies that arrive on
// it: with two links up (Wi-Fi and a USB tether, two WANs), each link's
// controller measures its own path.
func listenOn(ifname string) func(network, address string) (net.PacketConn, error) {
	return func(network, address string) (net.PacketConn, error) {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return nil, fmt.Errorf("binding probes to interface %s: %w", ifname, err)
		}
		v6 := network == "udp6" || network == "ip6:ipv6-icmp"
		var c net.PacketConn
		switch network {
		case "udp4", "udp6":
			c, err = listenDatagram(v6, address, ifi)
		default:
			lc := net.ListenConfig{Control: BindControl(ifname)}
			c, err = lc.ListenPacket(context.Background(), network, address)
		}
		if err != nil {
			return nil, err
		}
		b := &boundConn{PacketConn: c, ifname: ifname}
		if v6 {
			b.p6 = ipv6.NewPacketConn(c)
		} else {
			b.p4 = ipv4.NewPacketConn(c)
		}
		return b, nil
	}
}

// listenDatagram opens an unprivileged ICMP ("ping") socket bound to ifi,
// as icmp.ListenPacket("udp4"/"udp6", address) does without the binding.
func listenDatagram(v6 bool, address string, ifi *net.Interface) (net.PacketConn, error) {
	family, proto := syscall.AF_INET, syscall.IPPROTO_ICMP
	if v6 {
		family, proto = syscall.AF_INET6, syscall.IPPROTO_ICMPV6
	}
	addr, err := netip.ParseAddr(address)
	if err != nil {
		return nil, fmt.Errorf("ICMP socket address %q: %w", address, err)
	}
	syscall.ForkLock.RLock()
	s, err := syscall.Socket(family, syscall.SOCK_DGRAM, proto)
	if err == nil {
		syscall.CloseOnExec(s)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	fail := func(op string, err error) (net.PacketConn, error) {
		syscall.Close(s)
		return nil, os.NewSyscallError(op, err)
	}
	if err := prepareDatagram(s, v6); err != nil {
		return fail("setsockopt", err)
	}
	if err := bindToInterface(s, v6, ifi); err != nil {
		return fail("setsockopt", err)
	}
	var sa syscall.Sockaddr
	if v6 {
		sa = &syscall.SockaddrInet6{Addr: addr.As16()}
	} else {
		sa = &syscall.SockaddrInet4{Addr: addr.Unmap().As4()}
	}
	if err := syscall.Bind(s, sa); err != nil {
		return fail("bind", err)
	}
	f := os.NewFile(uintptr(s), "datagram-oriented icmp")
	c, err := net.FilePacketConn(f)
	f.Close()
	return c, err
}

// boundConn is an ICMP socket bound to an interface. It reads as
// icmp.PacketConn does, and offers the same IPv4PacketConn and
// IPv6PacketConn accessors, so the reply filter (filterReplies) applies to
// it too.
type boundConn struct {
	net.PacketConn
	ifname string
	p4     *ipv4.PacketConn
	p6     *ipv6.PacketConn
}

// ReadFrom reads one ICMP message. On darwin ipv4.NewPacketConn turns on
// IP_STRIPHDR, so the IPv4 header is read past through it, as
// icmp.PacketConn does.
func (c *boundConn) ReadFrom(b []byte) (int, net.Addr, error) {
	if runtime.GOOS == "darwin" && c.p4 != nil {
		n, _, peer, err := c.p4.ReadFrom(b)
		return n, peer, err
	}
	return c.PacketConn.ReadFrom(b)
}

// IPv4PacketConn returns the socket's IPv4 view, nil for an IPv6 socket.
func (c *boundConn) IPv4PacketConn() *ipv4.PacketConn { return c.p4 }

// IPv6PacketConn returns the socket's IPv6 view, nil for an IPv4 socket.
func (c *boundConn) IPv6PacketConn() *ipv6.PacketConn { return c.p6 }

// boundTo names the interface a socket is bound to ("" when it follows
// the routing table).
func boundTo(pc net.PacketConn) string {
	if b, ok := pc.(*boundConn); ok {
		return b.ifname
	}
	return ""
}
