// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/shape"
)

// twoLinks is a client with two uplinks, wa and wb, each to its own
// router namespace. Both routers hold the same reflector addresses, which
// answer after 10 ms behind wa and after 60 ms behind wb (user-space
// replies: the kernel here has no netem): ICMP echo and a UDP echo on
// port 7 at twoLinksReflector4 and twoLinksReflector6, TCP handshakes on
// any port at twoLinksTCP4 and twoLinksTCP6. The client's default routes
// prefer wa (metric 110) over wb (metric 120), as a Mac prefers its
// primary interface and a multi-WAN router its first WAN: a probe that
// follows the routing table always measures wa's path.
type twoLinks struct {
	client *netns.Namespace
}

const (
	twoLinksReflector4 = "10.81.0.1"
	twoLinksReflector6 = "fd81::1"
	twoLinksTCP4       = "10.81.0.3"
	twoLinksTCP6       = "fd81::3"
	fastDelay          = 10 * time.Millisecond
	slowDelay          = 60 * time.Millisecond
)

func newTwoLinks(t *testing.T) *twoLinks {
	up := netns.New(t, "bind").Uplinks("wa", "wb")
	up.Multihome()
	for i, delay := range []time.Duration{fastDelay, slowDelay} {
		r := up.Routers[i]
		r.AddAddr("lo", twoLinksReflector4+"/32")
		r.AddAddr("lo", twoLinksReflector6+"/128")
		r.SlowReflector(delay, twoLinksReflector4, twoLinksReflector6)
		r.SlowUDPEcho(delay, net.JoinHostPort(twoLinksReflector4, "7"), net.JoinHostPort(twoLinksReflector6, "7"))
		r.SlowTCPReflector(delay, netns.UplinkDev, twoLinksTCP4, twoLinksTCP6)
	}
	return &twoLinks{client: up.Client}
}

// listenBoundIn opens sockets bound to iface inside ns, as the daemon's
// prober opens them on the host.
func listenBoundIn(ns *netns.Namespace, iface string) func(network, address string) (net.PacketConn, error) {
	return func(network, address string) (net.PacketConn, error) {
		var pc net.PacketConn
		err := ns.Do(func() (err error) {
			pc, err = listenOn(iface)(network, address)
			return err
		})
		return pc, err
	}
}

// medianRTT probes refl with ICMP for d through iface ("" follows the
// routing table) and returns the median RTT of the replies.
func (tl *twoLinks) medianRTT(ctx context.Context, iface string, mode SocketMode, refl netip.Addr, d time.Duration) (time.Duration, error) {
	listen := listenBoundIn(tl.client, iface)
	if iface == "" {
		listen = listenIn(tl.client)
	}
	p, err := New(Config{
		Reflectors: []netip.Addr{refl}, Interval: 50 * time.Millisecond, Timeout: time.Second,
		Socket: mode, NoTimestamps: true, Listen: listen,
	})
	if err != nil {
		return 0, err
	}
	return runMedianRTT(ctx, p, iface, d)
}

// kindMedianRTT probes r (TCP or UDP) for d from the client, bound to
// iface as a link's controller binds its probes (Config.Interface; ""
// follows the routing table), and returns the median RTT of the replies.
func (tl *twoLinks) kindMedianRTT(ctx context.Context, iface string, mode SocketMode, r shape.Reflector, d time.Duration) (time.Duration, error) {
	p, err := New(Config{
		Reflectors: []netip.Addr{r.Addr}, Probes: []shape.Reflector{r}, Interval: 50 * time.Millisecond, Timeout: time.Second,
		Socket: mode, Interface: iface, InNetwork: tl.client.Do,
	})
	if err != nil {
		return 0, err
	}
	return runMedianRTT(ctx, p, iface, d)
}

// runMedianRTT runs p for d and returns the median RTT of its replies;
// with iface set, every socket p opened must say it is bound to iface.
func runMedianRTT(ctx context.Context, p *Prober, iface string, d time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	get := collect(p)
	p.Run(ctx)
	var rtts []time.Duration
	for _, s := range get(time.Time{}) {
		if s.Kind == KindReply {
			rtts = append(rtts, s.RTT)
		}
	}
	if len(rtts) < 5 {
		return 0, fmt.Errorf("%d replies in %v (stats %+v)", len(rtts), d, p.Stats())
	}
	if iface != "" {
		want := "via " + iface
		for _, s := range p.Stats().Sockets {
			if !strings.Contains(s, want) {
				return 0, fmt.Errorf("socket %q does not say it is bound (%q)", s, want)
			}
		}
	}
	return p50(rtts), nil
}

// TestNetnsEachLinkMeasuresItsOwnPath: two links to the same reflector
// address, 10 ms and 60 ms away. A prober that follows the routing table
// sees the default route's path from either link's point of view; bound
// to its interface, each sees its own delay, over IPv4 and IPv6, with
// datagram and raw sockets.
func TestNetnsEachLinkMeasuresItsOwnPath(t *testing.T) {
	tl := newTwoLinks(t)
	var probes []pathProbe
	for _, refl := range []string{twoLinksReflector4, twoLinksReflector6} {
		for _, mode := range []SocketMode{SocketDatagram, SocketRaw} {
			kind := map[SocketMode]string{SocketDatagram: "datagram", SocketRaw: "raw"}[mode]
			probes = append(probes, pathProbe{name: refl + " (" + kind + ")", medianRTT: func(ctx context.Context, iface string) (time.Duration, error) {
				return tl.medianRTT(ctx, iface, mode, netip.MustParseAddr(refl), time.Second)
			}})
		}
	}
	eachSeesItsOwnPath(t, probes)
}

// pathProbe is one kind of probe to one reflector: its name in messages,
// and its median RTT through an interface ("": the routing table).
type pathProbe struct {
	name      string
	medianRTT func(ctx context.Context, iface string) (time.Duration, error)
}

// eachSeesItsOwnPath runs every probe through the routing table, wa and
// wb, all at once (each prober has its own sockets, and the reflectors
// answer every request after the same fixed delay), and fails unless each
// sees the delay of the path it took.
func eachSeesItsOwnPath(t *testing.T, probes []pathProbe) {
	type run struct {
		probe pathProbe
		iface string
		want  time.Duration
		why   string
		got   time.Duration
		err   error
	}
	var runs []*run
	for _, p := range probes {
		runs = append(runs,
			&run{probe: p, iface: "", want: fastDelay, why: "the default route's (else the testbed is not what it claims)"},
			&run{probe: p, iface: "wa", want: fastDelay, why: "wa's own"},
			&run{probe: p, iface: "wb", want: slowDelay, why: "wb's own, not the default route's"})
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			r.got, r.err = r.probe.medianRTT(t.Context(), r.iface)
		})
	}
	wg.Wait()
	for _, r := range runs {
		via := r.iface
		if via == "" {
			via = "the routing table"
		}
		switch {
		case r.err != nil:
			t.Errorf("%s via %s: %v", r.probe.name, via, r.err)
		case r.got < r.want || r.got >= r.want+15*time.Millisecond:
			t.Errorf("%s via %s: median RTT %v, want %s %v", r.probe.name, via, r.got, r.why, r.want)
		default:
			t.Logf("%s via %s: median RTT %v", r.probe.name, via, r.got)
		}
	}
}

// TestNetnsEachLinksTCPAndUDPProbesMeasureItsOwnPath: TCP probes (raw
// SYNs and connect()) and UDP echoes, bound to a link's interface as its
// controller binds them (Config.Interface), see that link's delay, over
// IPv4 and IPv6; following the routing table, they see the default
// route's. Unbound, every probe "via wb" would see wa's 10 ms; a raw SYN
// bound to wb but checksummed for wa's address would go unanswered.
func TestNetnsEachLinksTCPAndUDPProbesMeasureItsOwnPath(t *testing.T) {
	tl := newTwoLinks(t)
	var probes []pathProbe
	for _, c := range []struct {
		refl   string
		mode   SocketMode
		socket string
	}{
		{"tcp:" + twoLinksTCP4 + ":443", SocketRaw, "raw SYN"},
		{"tcp:[" + twoLinksTCP6 + "]:443", SocketRaw, "raw SYN"},
		{"tcp:" + twoLinksTCP4 + ":443", SocketDatagram, "connect"},
		{"tcp:[" + twoLinksTCP6 + "]:443", SocketDatagram, "connect"},
		{"udp:" + twoLinksReflector4 + ":7", SocketAuto, "echo"},
		{"udp:[" + twoLinksReflector6 + "]:7", SocketAuto, "echo"},
	} {
		refl := reflector(t, c.refl)
		probes = append(probes, pathProbe{name: fmt.Sprintf("%s (%s)", refl, c.socket), medianRTT: func(ctx context.Context, iface string) (time.Duration, error) {
			return tl.kindMedianRTT(ctx, iface, c.mode, refl, time.Second)
		}})
	}
	eachSeesItsOwnPath(t, probes)
}

// TestNetnsBindingToAMissingInterfaceSaysWhich: a link whose interface is
// gone gets an error naming it, not probes through another interface.
func TestNetnsBindingToAMissingInterfaceSaysWhich(t *testing.T) {
	tl := newTwoLinks(t)
	_, err := New(Config{Reflectors: []netip.Addr{netip.MustParseAddr(twoLinksReflector4)}, Socket: SocketDatagram, Listen: listenBoundIn(tl.client, "nosuch0")})
	if err == nil || !strings.Contains(err.Error(), "interface nosuch0") {
		t.Fatalf("New with a missing interface: %v, want an error naming it", err)
	}
}
