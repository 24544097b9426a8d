// SPDX-License-Identifier: Apache-2.0

package machine

import (
	"context"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/icmp"

	"github.com/macake/macake/doctor"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
)

// SocketOpener is the real doctor.ICMPOpener: it opens a socket with x/net/icmp,
// exactly as the prober does, and closes it at once. Nothing is sent.
type SocketOpener struct{}

// Open implements doctor.ICMPOpener.
func (SocketOpener) Open(network string) error {
	addr := "0.0.0.0"
	if network == "udp6" || network == "ip6:ipv6-icmp" {
		addr = "::"
	}
	c, err := icmp.ListenPacket(network, addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// ProbePinger is the real doctor.Pinger: the controller's own prober (echo only),
// run for Count probes per target.
type ProbePinger struct {
	// Count is how many echoes each target gets (default 3).
	Count int
	// Interval spaces the probes to one target (default 200 ms); Timeout
	// is how long a reply may take (default 1 s).
	Interval, Timeout time.Duration
	// Listen opens the sockets (default icmp.ListenPacket); tests use it
	// to probe inside a network namespace.
	Listen func(network, address string) (net.PacketConn, error)
}

// Ping implements doctor.Pinger: the probes are bound to iface as the
// controller's are (Listen, when set, opens the sockets instead).
func (p ProbePinger) Ping(ctx context.Context, iface string, targets []shape.Reflector) ([]doctor.Echo, error) {
	count, interval, timeout := p.Count, p.Interval, p.Timeout
	if count <= 0 {
		count = 3
	}
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	if timeout <= 0 {
		timeout = time.Second
	}
	pr, err := probe.New(probe.Config{Reflectors: shape.ReflectorAddrs(targets), Probes: targets, Interval: interval, Timeout: timeout, NoTimestamps: true, Interface: iface, Listen: p.Listen})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		pr.Run(ctx)
		close(done)
	}()
	echoes := map[netip.Addr]*doctor.Echo{}
	rtts := map[netip.Addr][]time.Duration{}
	for _, t := range targets {
		echoes[t.Addr.Unmap()] = &doctor.Echo{Target: t.Addr.Unmap(), Interface: iface}
	}
	finished := func() bool {
		for _, e := range echoes {
			if e.Sent < count {
				return false
			}
		}
		return true
	}
	deadline := time.NewTimer(time.Duration(count)*interval + timeout + time.Second)
	defer deadline.Stop()
collect:
	for !finished() {
		select {
		case s, open := <-pr.Samples():
			if !open {
				break collect
			}
			e := echoes[s.Reflector]
			if e == nil || e.Sent >= count {
				continue
			}
			e.Sent++
			switch s.Kind {
			case probe.KindReply:
				e.Received++
				rtts[s.Reflector] = append(rtts[s.Reflector], s.RTT)
			case probe.KindUnreachable:
				e.Err = s.Err
			}
		case <-deadline.C:
			break collect
		case <-ctx.Done():
			break collect
		}
	}
	pr.SetPaused(true)
	cancel()
	for range pr.Samples() {
	}
	<-done
	out := make([]doctor.Echo, 0, len(targets))
	for _, t := range targets {
		e := echoes[t.Addr.Unmap()]
		if r := rtts[e.Target]; len(r) > 0 {
			e.RTT = probe.Median(r)
		}
		out = append(out, *e)
	}
	return out, nil
}
