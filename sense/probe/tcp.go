// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/macake/macake/sense/probe/wire"
	"github.com/macake/macake/shape"
)

// A TCP probe times a handshake with the reflector's port: the SYN's
// answer, a SYN-ACK from an open port or a RST from a closed one, comes
// back through the same queues as the user's traffic, whatever the network
// does to ICMP. Two ways to send one:
//
//   - raw SYN (Linux, root): a raw TCP socket sends a bare SYN from a port
//     the prober reserves, with an initial sequence number derived from a
//     per-prober secret and the probe's number; the reply counts when it
//     comes from the reflector's address and port to the reserved port,
//     with SYN-ACK or RST and the acknowledgement number SYN+1 (strict
//     matching, as for ICMP). The kernel has no connection on that port,
//     so it resets the SYN-ACK: the reflector never holds a connection.
//     One SYN per probe, so any timeout can be honoured.
//   - connect() (macOS, and Linux without CAP_NET_RAW): a non-blocking
//     connect() is timed until it completes (SYN-ACK) or is refused (RST),
//     then the socket is closed with a reset (SO_LINGER 0). The kernel
//     matches the reply. It resends an unanswered SYN after its initial
//     retransmission timeout (1 s on Linux and macOS), and a handshake
//     completed by the resent SYN would read as a 1 s delay; so a
//     connect()-timed probe gives up at synRetransmit and counts as lost.
//     Queues deeper than that show as loss, not as delay.
//
// Either way, a prober bound to a link (Config.Interface) binds the
// sockets to its interface, as it binds its ICMP sockets (BindControl).

// synRetransmit is the kernels' initial retransmission timeout for a SYN
// (RFC 6298's 1 s, on Linux and macOS): a connect() that takes longer may
// have been completed by a second SYN.
const synRetransmit = time.Second

// tcpHeaderLen is the SYN's header: 20 bytes and an MSS option, which
// some servers and middleboxes want to see on a SYN.
const tcpHeaderLen = 24

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// putSYN writes a SYN from sport to dport with sequence number isn into b
// (at least tcpHeaderLen bytes) and returns that part of b. With src
// valid it fills in the wire.Checksum over the pseudo-header of src and dst;
// without it the wire.Checksum stays zero for the kernel to fill
// (IPV6_CHECKSUM).
func putSYN(b []byte, src, dst netip.Addr, sport, dport uint16, isn uint32) []byte {
	b = b[:tcpHeaderLen]
	clear(b)
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint32(b[4:], isn)
	b[12] = tcpHeaderLen / 4 << 4
	b[13] = tcpSYN
	binary.BigEndian.PutUint16(b[14:], 65535) // window
	b[20], b[21] = 2, 4                       // MSS
	binary.BigEndian.PutUint16(b[22:], 1220)  // fits any path, IPv6 included
	if src.IsValid() {
		binary.BigEndian.PutUint16(b[16:], tcpChecksum(src, dst, b))
	}
	return b
}

// tcpChecksum is the TCP wire.Checksum of segment seg from src to dst
// (RFC 793's pseudo-header; RFC 8200's for IPv6).
func tcpChecksum(src, dst netip.Addr, seg []byte) uint16 {
	ph := make([]byte, 0, 40+len(seg))
	ph = append(ph, src.AsSlice()...)
	ph = append(ph, dst.AsSlice()...)
	if src.Is4() {
		ph = append(ph, 0, 6, byte(len(seg)>>8), byte(len(seg)))
	} else {
		ph = binary.BigEndian.AppendUint32(ph, uint32(len(seg)))
		ph = append(ph, 0, 0, 0, 6)
	}
	return wire.Checksum(append(ph, seg...))
}

// segment is a received TCP header, reduced to what matching needs.
type segment struct {
	sport, dport uint16
	seq, ack     uint32
	flags        byte
}

// parseSegment reads a TCP header; ok is false for anything shorter.
func parseSegment(b []byte) (segment, bool) {
	if len(b) < 20 {
		return segment{}, false
	}
	return segment{
		sport: binary.BigEndian.Uint16(b[0:]), dport: binary.BigEndian.Uint16(b[2:]),
		seq: binary.BigEndian.Uint32(b[4:]), ack: binary.BigEndian.Uint32(b[8:]), flags: b[13],
	}, true
}

// answers tells whether seg answers a SYN: SYN-ACK, or RST with ACK.
func (s segment) answers() bool {
	return s.flags&tcpACK != 0 && (s.flags&(tcpSYN|tcpRST) == tcpSYN || s.flags&(tcpSYN|tcpRST) == tcpRST)
}

// isnOf is the initial sequence number of probe seq: the prober's secret
// plus the probe's number, so the acknowledgement of a reply names the
// probe and a stranger cannot guess it.
func isnOf(secret, seq uint32) uint32 { return secret + seq }

// connectSender times TCP handshakes with connect() (see the top of this
// file): one goroutine per probe in flight, at most
// synRetransmit/spacing of them.
type connectSender struct {
	network string
	timeout time.Duration
	cfg     Config
	// bind binds each handshake's socket to Config.Interface (nil: the
	// routing table's choice); it keeps the interface it looked up.
	bind func(network, address string, c syscall.RawConn) error

	mu     sync.Mutex
	report func(outcome)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

// openConnect returns the connect()-timed sender of one family, whose
// handshakes leave through Config.Interface when it names one.
func openConnect(v6 bool, cfg Config) *connectSender {
	network := "tcp4"
	if v6 {
		network = "tcp6"
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &connectSender{network: network, timeout: min(cfg.Timeout, synRetransmit), cfg: cfg, bind: bindControl(cfg), ctx: ctx, cancel: cancel}
}

func (s *connectSender) describe() string {
	return s.network + " (connect" + via(s.cfg.Interface) + ")"
}

func (s *connectSender) start(report func(outcome)) {
	s.mu.Lock()
	s.report = report
	s.mu.Unlock()
}

func (s *connectSender) send(r shape.Reflector, seq uint32, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		o := s.handshake(r, seq)
		s.mu.Lock()
		report := s.report
		closed := s.closed
		s.mu.Unlock()
		if report != nil && !closed {
			report(o)
		}
	}()
	return nil
}

// handshake runs one connect() and says how it ended.
func (s *connectSender) handshake(r shape.Reflector, seq uint32) outcome {
	o := outcome{kind: shape.ProbeTCP, addr: r.Addr, seq: seq}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	d := net.Dialer{Control: s.bind}
	var c net.Conn
	var err error
	ierr := inNetwork(s.cfg, func() error {
		o.sent = time.Now()
		c, err = d.DialContext(ctx, s.network, r.AddrPort().String())
		o.received = time.Now()
		return nil
	})
	switch {
	case ierr != nil:
		o.ev, o.err = evUnreachable, ierr.Error()
	case err == nil:
		o.ev = evReply
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset: neither end keeps the connection
		}
		c.Close()
	case errors.Is(err, syscall.ECONNREFUSED):
		o.ev = evReply // the port's RST answered the SYN
	case ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded):
		// The dial's deadline can fire a moment before its context's.
		o.ev = evLost
	default:
		o.ev, o.err = evUnreachable, fmt.Sprintf("TCP handshake: %v", err)
	}
	return o
}

func (s *connectSender) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}
