// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"net/netip"
	"os"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/shape"
)

// TestKernelShaperStats blasts UDP through a 1 Mbit/s upload shaper with
// a small queue (an 8 KiB bfifo; CAKE with a 64 KiB memlimit) on a real
// kernel and reads the counters back as status shows them: what the
// shaper sent, and the drops of its full queue.
// MACAKE_TC_STATS_RECORD=FILE saves the raw `tc -s -j qdisc show` for the
// replay test.
func TestKernelShaperStats(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		lab := netns.New(t, "tcstats")
		c, s := lab.Namespace("c"), lab.Namespace("s")
		lab.Link(c, "wan0", s, "peer0")
		c.AddAddr("wan0", "10.77.0.1/24")
		s.AddAddr("peer0", "10.77.0.2/24")
		b := ks.netlinkBackend(t, c.Name(), execrun.Exec{})
		link := shape.Link{Name: "wan", Interface: "wan0",
			Upload:   shape.Pipe{RateBits: 1_000_000, QueueBytes: 8 << 10},
			Download: shape.Pipe{RateBits: 50_000_000, QueueBytes: 64 << 10}}
		// CAKE sizes its own queue from its memlimit, which it counts in
		// kernel memory (a 1200-byte datagram takes about 2 KiB).
		queue := int64(8 << 10)
		if ks.cake {
			queue = 64 << 10
			link.Cake = &shape.Cake{MemLimit: queue}
		}
		apply(t, b, shape.State{Links: []shape.Link{link}})

		ctx := context.Background()
		before, err := b.ShaperStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(before) != 2 || before[0].Name != "qdisc 4d4b: on ifb-macake0" || before[1].Name != "qdisc 4d4b: on wan0" {
			t.Fatalf("stats of %+v, want the IFB's and wan0's shapers", before)
		}
		// A permanent neighbour: no ARP request joins the traffic, and no
		// datagram waits (or is dropped) for one before the shaper.
		c.IP("neigh", "replace", "10.77.0.2", "lladdr", s.HardwareAddr("peer0").String(), "dev", "wan0", "nud", "permanent")
		conn, err := c.Dial(ctx, nil, "udp", netip.MustParseAddrPort("10.77.0.2:9").String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		payload := make([]byte, 1200)
		const sent = 400 // 480 KB at once into a small queue at 1 Mbit/s
		for range sent {
			conn.Write(payload) // a drop is not a write error for UDP
		}
		after, err := b.ShaperStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		up := after[1]
		if up.Drops < sent/2 {
			t.Errorf("upload shaper dropped %d of %d datagrams into a full queue of %d B, want most: %+v", up.Drops, sent, queue, up)
		}
		// Each datagram is 1242 bytes on the wire (UDP, IPv4, Ethernet); the
		// kernel's own few packets (IPv6 neighbour discovery) pass too,
		// and a datagram or two may be between queue and device.
		total := int(up.Packets + up.Drops + up.BacklogPackets)
		if up.Packets == 0 || up.Bytes < up.Packets*40 || total < sent-5 || total > sent+5 {
			t.Errorf("upload shaper counters do not add up to the %d datagrams: %+v", sent, up)
		}
		if int64(up.BacklogBytes) > queue+1500 || up.Overlimits == 0 {
			t.Errorf("backlog %d bytes (queue %d B), overlimits %d: %+v", up.BacklogBytes, queue, up.Overlimits, up)
		}
		if path := os.Getenv("MACAKE_TC_STATS_RECORD"); path != "" {
			out, err := runOutput(ctx, b.Runner, b.Tools.tcCmd("-s", "-j", "qdisc", "show"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
}
