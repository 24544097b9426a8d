// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"context"
	"fmt"
	"io"
	"net"
)

// PriorityBottleneck is Bottleneck for an ISP that gives ICMP strict
// priority, as some carriers do: ICMP crosses the same link, at the same
// rate, but never waits behind other traffic, so ICMP probes see no queue
// while everything else sees the whole bfifo.
//
// This kernel has no prio (or ets, drr) qdisc, so the priority is htb's
// own: under the class 1:1 at the link's rate (which SetRate changes, as
// for Bottleneck), ICMP goes to a class with a guaranteed 1 Mbit/s at
// prio 0, everything else to a class that guarantees almost nothing
// (8 kbit/s) and borrows up to the rate at prio 1. htb dequeues a class
// within its guarantee before any class that borrows, so an ICMP packet
// leaves next; both borrow up to the rate, so the link's capacity is the
// same as Bottleneck's. ICMP's queue is a short pfifo (ICMP is a trickle);
// everyone else's is the bfifo of limitBytes.
func (ns *Namespace) PriorityBottleneck(dev string, rateBits, limitBytes int64) *Bottleneck {
	ns.lab.tb.Helper()
	// The classes' ceilings are the parent's business: they borrow
	// whatever it has, whatever SetRate makes it.
	const peak = "10gbit"
	// A Bottleneck may be in place: start from the device's default.
	ns.lab.exec(context.Background(), "", "tc", "-n", ns.name, "qdisc", "del", "dev", dev, "root")
	ns.TC("qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "11")
	ns.TC("class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", Rate(rateBits), "ceil", Rate(rateBits))
	ns.TC("class", "add", "dev", dev, "parent", "1:1", "classid", "1:10", "htb", "rate", "1mbit", "ceil", peak, "prio", "0")
	ns.TC("class", "add", "dev", dev, "parent", "1:1", "classid", "1:11", "htb", "rate", "8kbit", "ceil", peak, "prio", "1")
	ns.TC("qdisc", "add", "dev", dev, "parent", "1:10", "handle", "20:", "pfifo", "limit", "100")
	ns.TC("qdisc", "add", "dev", dev, "parent", "1:11", "handle", "21:", "bfifo", "limit", fmt.Sprint(limitBytes))
	ns.TC("filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
		"match", "ip", "protocol", "1", "0xff", "flowid", "1:10")
	ns.TC("filter", "add", "dev", dev, "parent", "1:", "protocol", "ipv6", "prio", "2", "u32",
		"match", "ip6", "protocol", "58", "0xff", "flowid", "1:10")
	return &Bottleneck{ns: ns, dev: dev, limit: limitBytes}
}

// ServeTCP listens on address inside the namespace and holds every
// connection it accepts until the peer closes or resets it, as a server
// does: the answer to a TCP probe's SYN is the SYN-ACK, and the server
// never closes first (which would leave it in TIME-WAIT). It stops in
// the test's Cleanup.
func (ns *Namespace) ServeTCP(network, address string) {
	ns.lab.tb.Helper()
	ln, err := ns.Listen(nil, network, address)
	if err != nil {
		ns.lab.tb.Fatalf("listening on %s in %s: %v", address, ns.name, err)
	}
	ns.lab.tb.Cleanup(func() { ln.Close() })
	AcceptEach(ln, func(c net.Conn) {
		io.Copy(io.Discard, c)
		c.Close()
	})
}
