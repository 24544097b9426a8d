// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"fmt"
	"net"
	"time"
)

// The addresses and devices of a [Lab.Pair]: the server end is the
// client's gateway (.1), the client .2, in IPv4 and in IPv6.
const (
	ClientDev = "vc"
	ServerDev = "vs"
	ClientIP4 = "10.77.0.2"
	ServerIP4 = "10.77.0.1"
	ClientIP6 = "fd77::2"
	ServerIP6 = "fd77::1"
)

// Pair is the lab most tests need: a client and a server namespace joined
// by one veth pair (Link: offloads off), ClientDev in the client and
// ServerDev in the server, numbered ClientIP4/ServerIP4 in a /24 and
// ClientIP6/ServerIP6 in a /64. Routes are the test's: the two ends share
// their subnets, and a test that needs a default route says which.
func (l *Lab) Pair() (client, server *Namespace) {
	l.tb.Helper()
	client, server = l.Namespace("c"), l.Namespace("s")
	l.Link(client, ClientDev, server, ServerDev)
	client.AddAddr(ClientDev, ClientIP4+"/24")
	server.AddAddr(ServerDev, ServerIP4+"/24")
	client.AddAddr(ClientDev, ClientIP6+"/64")
	server.AddAddr(ServerDev, ServerIP6+"/64")
	return client, server
}

// Uplinks is a client namespace with several uplinks, each a veth pair
// to a router namespace of its own: the client's end named by the test
// (Devs), the router's UplinkDev. Uplink i (from 0) is numbered
// 10.77.(i+1).2 on the client and .1 on the router (/24), and
// fd77:(i+1)::2 and ::1 (/64). Routing is the test's: Multihome is the
// usual.
type Uplinks struct {
	Client  *Namespace
	Routers []*Namespace
	Devs    []string
}

// UplinkDev is the router's end of every uplink.
const UplinkDev = "wan"

// Uplinks builds a client with one uplink per name in devs.
func (l *Lab) Uplinks(devs ...string) *Uplinks {
	l.tb.Helper()
	u := &Uplinks{Client: l.Namespace("c"), Devs: devs}
	for i, dev := range devs {
		r := l.Namespace(fmt.Sprintf("r%d", i+1))
		l.Link(u.Client, dev, r, UplinkDev)
		n := i + 1
		u.Client.AddAddr(dev, fmt.Sprintf("10.77.%d.2/24", n))
		r.AddAddr(UplinkDev, fmt.Sprintf("10.77.%d.1/24", n))
		u.Client.AddAddr(dev, fmt.Sprintf("fd77:%d::2/64", n))
		r.AddAddr(UplinkDev, fmt.Sprintf("fd77:%d::1/64", n))
		u.Routers = append(u.Routers, r)
	}
	return u
}

// Gateway4 is uplink i's router address in IPv4.
func (u *Uplinks) Gateway4(i int) string { return fmt.Sprintf("10.77.%d.1", i+1) }

// Gateway6 is uplink i's router address in IPv6.
func (u *Uplinks) Gateway6(i int) string { return fmt.Sprintf("fd77:%d::1", i+1) }

// Multihome gives the client a default route through every uplink in
// both families, preferred in the order of Devs (metrics 110, 120, …), as
// a Mac prefers its primary interface and a multi-WAN router its first
// WAN; and it turns reverse-path filtering off on the client, since a
// reply to traffic bound to a less preferred uplink arrives there although
// the best route back is another.
func (u *Uplinks) Multihome() {
	u.Client.lab.tb.Helper()
	for i, dev := range u.Devs {
		metric := fmt.Sprint(110 + 10*i)
		u.Client.IP("route", "add", "default", "via", u.Gateway4(i), "dev", dev, "metric", metric)
		u.Client.IP("-6", "route", "add", "default", "via", u.Gateway6(i), "dev", dev, "metric", metric)
	}
	for _, k := range append([]string{"all", "default"}, u.Devs...) {
		u.Client.Sysctl("net.ipv4.conf."+k+".rp_filter", "0")
	}
}

// WAN is a bloated ISP's link as its router shapes it on the device
// facing the customer: what the device sends is the download, what it
// receives (redirected to an IFB device) the upload; each is an htb class
// at its rate with a drop-tail bfifo.
type WAN struct {
	// Download and Upload are the two bottlenecks; SetRate changes one
	// while traffic flows.
	Download, Upload *Bottleneck
}

// WAN shapes dev as the ISP end of a customer's link: download and upload
// rates in bits per second, each with a bfifo holding buffer's worth of
// its rate (100 ms is a bloated modem; a second, a very bloated one). The
// customer's own devices stay free for what the test runs there (macake's
// shaper included). The IFB device is named after dev.
func (ns *Namespace) WAN(dev string, download, upload int64, buffer time.Duration) *WAN {
	ns.lab.tb.Helper()
	return &WAN{
		Download: ns.Bottleneck(dev, download, BufferBytes(download, buffer)),
		Upload:   ns.IngressBottleneck(dev, "ifb-"+dev, upload, BufferBytes(upload, buffer)),
	}
}

// BufferBytes is how many bytes a queue drained at rateBits holds for d.
func BufferBytes(rateBits int64, d time.Duration) int64 {
	return rateBits / 8 * d.Microseconds() / 1e6
}

// AcceptEach serves every connection ln accepts with handle, each in a
// goroutine of its own, until ln is closed; it returns at once. handle
// owns the connection (it closes it).
func AcceptEach(ln net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
}
