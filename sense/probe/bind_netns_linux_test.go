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
)

// twoLinks is a client with two uplinks, wa and wb, each to its own
// router namespace. Both routers hold the same reflector address, which
// answers after 10 ms behind wa and after 60 ms behind wb (user-space
// replies: the kernel here has no netem). The client's default routes
// prefer wa (metric 100) over wb (metric 200), as a Mac prefers its
// primary interface and a multi-WAN router its first WAN: a probe that
// follows the routing table always measures wa's path.
type twoLinks struct {
	client *netns.Namespace
}

const (
	twoLinksReflector4 = "10.81.0.1"
	twoLinksReflector6 = "fd81::1"
	fastDelay          = 10 * time.Millisecond
	slowDelay          = 60 * time.Millisecond
)

func newTwoLinks(t *testing.T) *twoLinks {
	lab := netns.New(t, "bind")
	c := lab.Namespace("c")
	for i, l := range []struct {
		dev   string
		delay time.Duration
	}{{"wa", fastDelay}, {"wb", slowDelay}} {
		n := string(rune('1' + i))
		r := lab.Namespace("r" + n)
		lab.Link(c, l.dev, r, "wan")
		c.AddAddr(l.dev, "10.81."+n+".2/24")
		r.AddAddr("wan", "10.81."+n+".1/24")
		c.AddAddr(l.dev, "fd81:"+n+"::2/64")
		r.AddAddr("wan", "fd81:"+n+"::1/64")
		r.AddAddr("lo", twoLinksReflector4+"/32")
		r.AddAddr("lo", twoLinksReflector6+"/128")
		metric := "1" + n + "0"
		c.IP("route", "add", "default", "via", "10.81."+n+".1", "dev", l.dev, "metric", metric)
		c.IP("-6", "route", "add", "default", "via", "fd81:"+n+"::1", "dev", l.dev, "metric", metric)
		r.SlowReflector(l.delay, twoLinksReflector4, twoLinksReflector6)
	}
	// Replies to wb's probes arrive on wb although the best route back to
	// the reflector is wa: strict reverse-path filtering would drop them.
	for _, k := range []string{"all", "default", "wa", "wb"} {
		c.Sysctl("net.ipv4.conf."+k+".rp_filter", "0")
	}
	return &twoLinks{client: c}
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

// medianRTT probes refl for d through iface ("" follows the routing
// table) and returns the median RTT of the replies.
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
	type run struct {
		refl  string
		mode  SocketMode
		iface string
		want  time.Duration
		why   string
		got   time.Duration
		err   error
	}
	var runs []*run
	for _, refl := range []string{twoLinksReflector4, twoLinksReflector6} {
		for _, mode := range []SocketMode{SocketDatagram, SocketRaw} {
			runs = append(runs,
				&run{refl: refl, mode: mode, iface: "", want: fastDelay, why: "the default route's (else the testbed is not what it claims)"},
				&run{refl: refl, mode: mode, iface: "wa", want: fastDelay, why: "wa's own"},
				&run{refl: refl, mode: mode, iface: "wb", want: slowDelay, why: "wb's own, not the default route's"})
		}
	}
	// All at once: each prober has its own sockets, and the reflectors
	// answer every request after the same fixed delay.
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			r.got, r.err = tl.medianRTT(t.Context(), r.iface, r.mode, netip.MustParseAddr(r.refl), time.Second)
		})
	}
	wg.Wait()
	for _, r := range runs {
		kind := map[SocketMode]string{SocketDatagram: "datagram", SocketRaw: "raw"}[r.mode]
		via := r.iface
		if via == "" {
			via = "the routing table"
		}
		switch {
		case r.err != nil:
			t.Errorf("%s (%s) via %s: %v", r.refl, kind, via, r.err)
		case r.got < r.want || r.got >= r.want+15*time.Millisecond:
			t.Errorf("%s (%s) via %s: median RTT %v, want %s %v", r.refl, kind, via, r.got, r.why, r.want)
		default:
			t.Logf("%s (%s) via %s: median RTT %v", r.refl, kind, via, r.got)
		}
	}
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
