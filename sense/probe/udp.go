// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/macake/macake/sense/probe/wire"
	"github.com/macake/macake/shape"
)

// udpSender sends UDP probes from one unprivileged socket per family and
// times their echo: an RFC 862 echo service (port 7), or `macake measure
// --serve`, sends the datagram back. The datagram is the ICMP echo's
// payload (magic, the prober's nonce, the probe's number), so a reply
// counts only when it comes from the reflector's own address and port
// and carries this prober's nonce and a probe in flight.
type udpSender struct {
	pc      net.PacketConn
	network string
	iface   string // the interface the socket is bound to, "" for none
	nonce   uint64
	tr      *tracker
	buf     [wire.PayloadLen]byte // send runs under the prober's lock
	wg      sync.WaitGroup
	once    sync.Once
}

// openUDP opens the UDP socket of one family, bound to Config.Interface
// when it names one: the echoes then leave through that link and only
// its replies come back to the socket.
func openUDP(v6 bool, cfg Config, nonce uint64) (sender, error) {
	network, any := "udp4", "0.0.0.0:0"
	if v6 {
		network, any = "udp6", "[::]:0"
	}
	lc := net.ListenConfig{Control: bindControl(cfg)}
	var pc net.PacketConn
	err := inNetwork(cfg, func() (err error) {
		pc, err = lc.ListenPacket(context.Background(), network, any)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening a %s socket: %w", network, err)
	}
	return &udpSender{pc: pc, network: network, iface: cfg.Interface, nonce: nonce, tr: newTracker(shape.ProbeUDP, cfg.Timeout)}, nil
}

func (s *udpSender) describe() string { return s.network + " (echo" + via(s.iface) + ")" }

func (s *udpSender) send(r shape.Reflector, seq uint32, now time.Time) error {
	to := r.AddrPort()
	wire.PutPayload(s.buf[:], s.nonce, seq)
	s.tr.add(seq, to, now)
	if _, err := s.pc.WriteTo(s.buf[:], net.UDPAddrFromAddrPort(to)); err != nil {
		s.tr.cancel(seq)
		return err
	}
	return nil
}

func (s *udpSender) start(report func(outcome)) {
	s.tr.start(report)
	s.wg.Go(s.read)
}

func (s *udpSender) read() {
	// An ICMP error queued on the socket (port unreachable) reads as an
	// error on some systems; readEach skips it and the probe times out.
	readEach(s.pc, func(b []byte, from net.Addr, now time.Time) {
		ua, ok := from.(*net.UDPAddr)
		if !ok {
			return
		}
		ap := ua.AddrPort()
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		nonce, seq, ok := wire.DecodePayload(b)
		if !ok || nonce != s.nonce || len(b) != wire.PayloadLen {
			s.tr.stray()
			return
		}
		s.tr.match(seq, ap, now)
	}, nil)
}

func (s *udpSender) close() {
	s.once.Do(func() {
		s.tr.stop()
		s.pc.Close()
		s.wg.Wait()
	})
}
