// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/macake/macake/shape"
)

// openTCP opens the TCP sender of one family: raw SYNs where the process
// may open a raw socket (root or CAP_NET_RAW), else connect() timing.
// SocketRaw insists on raw SYNs, SocketDatagram on connect().
func openTCP(v6 bool, cfg Config, _ uint64) (sender, error) {
	if cfg.Socket == SocketDatagram {
		return openConnect(v6, cfg), nil
	}
	s, err := openRawTCP(v6, cfg)
	if err == nil {
		return s, nil
	}
	if cfg.Socket == SocketRaw {
		return nil, err
	}
	return openConnect(v6, cfg), nil
}

// rawTCPSender sends bare SYNs from a raw socket and reads the answers
// from it (see tcp.go). A classic BPF filter lets only segments to the
// reserved port wake the reader: a raw TCP socket otherwise receives a
// copy of every TCP segment the host receives.
type rawTCPSender struct {
	pc  net.PacketConn // "ip4:tcp" or "ip6:tcp"; Go strips the IPv4 header
	v6  bool
	cfg Config
	// bind binds the raw socket, and the UDP socket that finds the source
	// address, to Config.Interface (nil: the routing table's choice).
	bind    func(network, address string, c syscall.RawConn) error
	port    uint16 // the reserved source port
	reserve int    // the bound (never listening) socket that holds port
	secret  uint32
	tr      *tracker
	buf     [tcpHeaderLen]byte // send runs under the prober's lock
	src     map[netip.Addr]source
	// reads counts the segments the filter let through (tests check
	// that a busy link's traffic does not reach the reader).
	reads atomic.Int64
	wg    sync.WaitGroup
	once  sync.Once
}

// source is the local address the kernel uses towards a reflector, which
// the IPv4 wire.Checksum covers; looked up again every sourceTTL, as routes
// change. A raw socket bound to an interface sends with that interface's
// address, so the lookup is bound to it too: a wire.Checksum computed for the
// default route's address would make the reflector drop the SYN.
type source struct {
	addr netip.Addr
	at   time.Time
}

const sourceTTL = 10 * time.Second

// openRawTCP opens the raw TCP sender of one family. With
// Config.Interface set, the raw socket is bound to it: the SYNs leave
// through that link, and the socket reads only the answers that arrive
// on it.
func openRawTCP(v6 bool, cfg Config) (*rawTCPSender, error) {
	network, family, any := "ip4:tcp", unix.AF_INET, "0.0.0.0"
	if v6 {
		network, family, any = "ip6:tcp", unix.AF_INET6, "::"
	}
	s := &rawTCPSender{v6: v6, cfg: cfg, bind: bindControl(cfg), tr: newTracker(shape.ProbeTCP, cfg.Timeout), src: map[netip.Addr]source{}, reserve: -1}
	var secret [4]byte
	if _, err := crand.Read(secret[:]); err != nil {
		return nil, err
	}
	s.secret = binary.BigEndian.Uint32(secret[:])
	err := inNetwork(cfg, func() error {
		// Reserve a port: a bound TCP socket that never listens keeps
		// other connections off it, and the kernel answers a SYN-ACK to
		// it with a reset. It is not bound to the interface, so that it
		// keeps the port on every interface.
		fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			return err
		}
		s.reserve = fd
		var sa unix.Sockaddr = &unix.SockaddrInet4{}
		if v6 {
			sa = &unix.SockaddrInet6{}
		}
		if err := unix.Bind(fd, sa); err != nil {
			return fmt.Errorf("reserving a port: %w", err)
		}
		bound, err := unix.Getsockname(fd)
		if err != nil {
			return err
		}
		switch b := bound.(type) {
		case *unix.SockaddrInet4:
			s.port = uint16(b.Port)
		case *unix.SockaddrInet6:
			s.port = uint16(b.Port)
		}
		lc := net.ListenConfig{Control: s.bind}
		pc, err := lc.ListenPacket(context.Background(), network, any)
		if err != nil {
			return fmt.Errorf("opening a raw %s socket: %w (needs root or CAP_NET_RAW)", network, err)
		}
		s.pc = pc
		return nil
	})
	if err == nil {
		err = s.setup()
	}
	if err != nil {
		s.closeSockets()
		return nil, err
	}
	return s, nil
}

// setup attaches the filter and, for IPv6, asks the kernel to fill in the
// wire.Checksum (it knows the source address the route picks).
func (s *rawTCPSender) setup() error {
	sc, ok := s.pc.(syscall.Conn)
	if !ok {
		return errors.New("the raw TCP socket has no file descriptor")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	prog, err := bpf.Assemble(tcpFilter(s.port, s.v6))
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]})
		if serr == nil && s.v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_CHECKSUM, 16)
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("setting up the raw TCP socket: %w", serr)
	}
	return nil
}

func (s *rawTCPSender) describe() string {
	if s.v6 {
		return "tcp6 (raw SYN" + via(s.cfg.Interface) + ")"
	}
	return "tcp4 (raw SYN" + via(s.cfg.Interface) + ")"
}

func (s *rawTCPSender) send(r shape.Reflector, seq uint32, now time.Time) error {
	var src netip.Addr
	if !s.v6 {
		var err error
		if src, err = s.source(r, now); err != nil {
			return err
		}
	}
	b := putSYN(s.buf[:], src, r.Addr, s.port, r.Port, isnOf(s.secret, seq))
	s.tr.add(seq, r.AddrPort(), now)
	if _, err := s.pc.WriteTo(b, &net.IPAddr{IP: r.Addr.AsSlice()}); err != nil {
		s.tr.cancel(seq)
		delete(s.src, r.Addr) // maybe the route went; look again next time
		return err
	}
	return nil
}

// source returns the local address towards r: the kernel's choice for a
// UDP socket connected there (connecting sends nothing), bound to the
// interface the raw socket is bound to.
func (s *rawTCPSender) source(r shape.Reflector, now time.Time) (netip.Addr, error) {
	if e, ok := s.src[r.Addr]; ok && now.Sub(e.at) < sourceTTL {
		return e.addr, nil
	}
	var local netip.Addr
	err := inNetwork(s.cfg, func() error {
		d := net.Dialer{Control: s.bind}
		c, err := d.Dial("udp4", r.AddrPort().String())
		if err != nil {
			return err
		}
		defer c.Close()
		local = c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		return nil
	})
	if err != nil {
		return local, fmt.Errorf("no route to %s: %w", r.Addr, err)
	}
	s.src[r.Addr] = source{addr: local, at: now}
	return local, nil
}

func (s *rawTCPSender) start(report func(outcome)) {
	s.tr.start(report)
	s.wg.Go(s.read)
}

func (s *rawTCPSender) read() {
	readEach(s.pc, func(b []byte, from net.Addr, now time.Time) {
		s.reads.Add(1)
		seg, ok := parseSegment(b)
		ia, isIP := from.(*net.IPAddr)
		if !ok || !isIP || seg.dport != s.port {
			return
		}
		if !seg.answers() {
			return // the kernel's own resets never come here; anything else is not an answer
		}
		a, _ := netip.AddrFromSlice(ia.IP)
		s.tr.match(seg.ack-1-s.secret, netip.AddrPortFrom(a.Unmap(), seg.sport), now)
	}, nil)
}

func (s *rawTCPSender) closeSockets() {
	if s.pc != nil {
		s.pc.Close()
	}
	if s.reserve >= 0 {
		unix.Close(s.reserve)
		s.reserve = -1
	}
}

func (s *rawTCPSender) close() {
	s.once.Do(func() {
		s.tr.stop()
		s.closeSockets()
		s.wg.Wait()
	})
}

// tcpFilter is the classic BPF program of a raw TCP socket: accept what
// goes to port, drop the rest. An IPv4 raw socket's filter sees the IP
// header first (its length in the low nibble of byte 0); an IPv6 one's
// sees the TCP header.
func tcpFilter(port uint16, v6 bool) []bpf.Instruction {
	accept, drop := bpf.RetConstant{Val: 0xffff}, bpf.RetConstant{Val: 0}
	if v6 {
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: 2, Size: 2},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(port), SkipFalse: 1},
			accept, drop,
		}
	}
	return []bpf.Instruction{
		bpf.LoadMemShift{Off: 0},
		bpf.LoadIndirect{Off: 2, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(port), SkipFalse: 1},
		accept, drop,
	}
}
