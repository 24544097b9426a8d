// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/score"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
)

// callMagic marks the call's packets ("macall").
const callMagic = 0x6d6163616c6c

// callPayload is a call packet's UDP payload: sim.CallBytes less the IP
// and UDP headers.
const callPayload = sim.CallBytes - 28

// Call is a VoIP-like stream both ways through the testbed: the client
// sends a packet of sim.CallBytes to the server every interval, and the
// server sends as many back once it has heard the client. Both ends live
// in this process and every namespace shares the host's clock, so the
// one-way delay of each packet is measured directly: arrival minus
// departure on one monotonic clock.
type Call struct {
	interval       time.Duration
	client, server net.PacketConn
	target         net.Addr

	mu   sync.Mutex
	peer net.Addr   // the client as the server hears it
	legs [2]callLeg // by shape.Direction
	done chan struct{}
	wg   sync.WaitGroup
}

// StartCall starts a call from client to target, a UDP address it listens
// on in server.
func StartCall(client, server *netns.Namespace, target netip.AddrPort, interval time.Duration) (*Call, error) {
	sc, err := server.ListenPacket("udp4", target.String())
	if err != nil {
		return nil, err
	}
	cc, err := client.ListenPacket("udp4", ":0")
	if err != nil {
		sc.Close()
		return nil, err
	}
	c := &Call{interval: interval, client: cc, server: sc, target: net.UDPAddrFromAddrPort(target), done: make(chan struct{})}
	c.wg.Add(4)
	go c.send(shape.Upload)
	go c.send(shape.Download)
	go c.receive(shape.Upload, sc)
	go c.receive(shape.Download, cc)
	return c, nil
}

// send sends direction d's stream: from the client up, from the server
// down (once the server knows where the client is).
func (c *Call) send(d shape.Direction) {
	defer c.wg.Done()
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	var msg [callPayload]byte
	for {
		c.mu.Lock()
		conn, to := c.client, c.target
		if d == shape.Download {
			conn, to = c.server, c.peer
		}
		if to != nil {
			leg := &c.legs[d]
			binary.BigEndian.PutUint64(msg[:8], uint64(len(leg.sent)))
			binary.BigEndian.PutUint64(msg[8:16], callMagic)
			leg.sent = append(leg.sent, time.Now())
			leg.owd = append(leg.owd, 0)
		}
		c.mu.Unlock()
		if to != nil {
			conn.WriteTo(msg[:], to)
		}
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
	}
}

// receive records the arrivals of direction d's packets on conn.
func (c *Call) receive(d shape.Direction, conn net.PacketConn) {
	defer c.wg.Done()
	buf := make([]byte, 2*callPayload)
	for {
		n, from, err := conn.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			return
		}
		if n != callPayload || binary.BigEndian.Uint64(buf[8:16]) != callMagic {
			continue
		}
		seq := binary.BigEndian.Uint64(buf[:8])
		c.mu.Lock()
		if d == shape.Upload && c.peer == nil {
			c.peer = from
		}
		leg := &c.legs[d]
		if seq < uint64(len(leg.sent)) && leg.owd[seq] == 0 {
			leg.owd[seq] = max(now.Sub(leg.sent[seq]), time.Nanosecond)
		}
		c.mu.Unlock()
	}
}

// Flow is what direction d's packets sent in [loadFrom, loadTo) felt, the
// one-way delay added to the median of those sent in [idleFrom, idleTo).
// Call it once the queues have drained.
func (c *Call) Flow(d shape.Direction, idleFrom, idleTo, loadFrom, loadTo time.Time, lostDelay time.Duration) score.Flow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.legs[d].flow(idleFrom, idleTo, loadFrom, loadTo, lostDelay)
}

// Close ends the call.
func (c *Call) Close() error {
	close(c.done)
	err := c.client.Close()
	if e := c.server.Close(); err == nil {
		err = e
	}
	c.wg.Wait()
	return err
}
