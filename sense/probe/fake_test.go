// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/macake/macake/sense/probe/wire"
)

// behaviour is how a fake reflector answers.
type behaviour struct {
	silent      bool          // never answers
	delay       time.Duration // round trip for echo
	up, down    time.Duration // one-way delays for timestamp requests
	clockOffset time.Duration // reflector clock minus ours
	timestamps  bool          // answers timestamp requests
	nonstandard bool          // sets the non-standard bit on its stamps
	duplicates  int           // extra copies of every reply
	unreachable bool          // answers with ICMP destination unreachable
	sendErr     error         // WriteTo fails with this
	corruptID   bool          // answers with a wrong identifier
}

// fakeNet is an in-memory network of reflectors. With shared set, every
// socket sees every reply, as on darwin.
type fakeNet struct {
	mu         sync.Mutex
	reflectors map[netip.Addr]behaviour
	conns      []*fakeConn
	shared     bool
	sent       []sentProbe
	listenErr  map[string]error
}

type sentProbe struct {
	to  netip.Addr
	typ byte
	at  time.Time
}

func newFakeNet() *fakeNet {
	return &fakeNet{reflectors: map[netip.Addr]behaviour{}, listenErr: map[string]error{}}
}

func (n *fakeNet) set(a string, b behaviour) {
	n.mu.Lock()
	n.reflectors[netip.MustParseAddr(a)] = b
	n.mu.Unlock()
}

func (n *fakeNet) sentTo(a string) []sentProbe {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []sentProbe
	for _, s := range n.sent {
		if a == "" || s.to == netip.MustParseAddr(a) {
			out = append(out, s)
		}
	}
	return out
}

func (n *fakeNet) listen(network, address string) (net.PacketConn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.listenErr[network]; err != nil {
		return nil, err
	}
	c := &fakeConn{net: n, network: network, in: make(chan packet, 64), closed: make(chan struct{})}
	if network == "udp4" || network == "udp6" {
		c.port = uint16(40000 + len(n.conns))
	}
	n.conns = append(n.conns, c)
	return c, nil
}

type packet struct {
	b    []byte
	from net.Addr
}

type fakeConn struct {
	net     *fakeNet
	network string
	port    uint16 // datagram sockets: the ident a rewriting kernel puts in the ID
	in      chan packet
	closed  chan struct{}
	once    sync.Once
}

func (c *fakeConn) dgram() bool { return c.network == "udp4" || c.network == "udp6" }

func (c *fakeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case p := <-c.in:
		return copy(b, p.b), p.from, nil
	case <-c.closed:
		return 0, nil, net.ErrClosed
	}
}

func (c *fakeConn) WriteTo(b []byte, dst net.Addr) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	to := addrOf(dst)
	now := time.Now()
	n := c.net
	n.mu.Lock()
	beh, known := n.reflectors[to]
	n.sent = append(n.sent, sentProbe{to: to, typ: b[0], at: now})
	n.mu.Unlock()
	if beh.sendErr != nil {
		return 0, beh.sendErr
	}
	if !known || beh.silent {
		return len(b), nil
	}
	req := append([]byte(nil), b...)
	if c.dgram() && datagramRewritesID {
		binary.BigEndian.PutUint16(req[4:], c.port)
	}
	var reply []byte
	var after time.Duration
	switch {
	case beh.unreachable:
		reply = wire.Unreachable4(to, req)
		after = time.Millisecond
	case req[0] == wire.TypeEcho4 || req[0] == wire.TypeEcho6:
		reply = append([]byte(nil), req...)
		reply[0] = wire.TypeEchoReply4
		if req[0] == wire.TypeEcho6 {
			reply[0] = wire.TypeEchoReply6
		}
		after = beh.delay
	case req[0] == wire.TypeTimestamp4 && beh.timestamps:
		reply = append([]byte(nil), req...)
		reply[0] = wire.TypeTimestampReply4
		stamp := uint32(wire.MsSinceMidnight(now.Add(beh.up+beh.clockOffset))) % wire.MsPerDay
		if beh.nonstandard {
			stamp |= wire.NonstandardBit
		}
		binary.BigEndian.PutUint32(reply[12:], stamp)
		binary.BigEndian.PutUint32(reply[16:], stamp)
		after = beh.up + beh.down
	default:
		return len(b), nil
	}
	if beh.corruptID {
		binary.BigEndian.PutUint16(reply[4:], binary.BigEndian.Uint16(reply[4:])+1)
	}
	var from net.Addr = &net.IPAddr{IP: to.AsSlice()}
	if c.dgram() {
		from = &net.UDPAddr{IP: to.AsSlice()}
	}
	copies := 1 + beh.duplicates
	time.AfterFunc(after, func() {
		for range copies {
			n.deliver(c, packet{b: reply, from: from})
		}
	})
	return len(b), nil
}

// deliver gives a reply to its sender's socket, or to every socket of the
// same family when the network is shared.
func (n *fakeNet) deliver(sender *fakeConn, p packet) {
	n.mu.Lock()
	targets := []*fakeConn{sender}
	if n.shared {
		targets = nil
		for _, c := range n.conns {
			if c.network == sender.network {
				targets = append(targets, c)
			}
		}
	}
	n.mu.Unlock()
	for _, c := range targets {
		select {
		case c.in <- p:
		case <-c.closed:
		}
	}
}

func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *fakeConn) LocalAddr() net.Addr {
	if c.dgram() {
		return &net.UDPAddr{Port: int(c.port)}
	}
	return &net.IPAddr{}
}

func (c *fakeConn) SetDeadline(time.Time) error      { return errors.New("not supported") }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return errors.New("not supported") }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return errors.New("not supported") }
