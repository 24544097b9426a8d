// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/shape"
)

// TestKernelShaperStats blasts UDP through a 1 Mbit/s upload shaper with
// a small queue (an 8 KiB bfifo; CAKE with a 64 KiB memlimit) on a real
// kernel and reads the counters back as status shows them: what the
// shaper sent, and the drops of its full queue.
// MACAKE_TC_STATS_RECORD=DIR saves the raw `tc -s -j qdisc show` for the
// replay tests, as DIR/qdisc-show-s-j.json (htb) and
// DIR/cake-qdisc-show-s-j.json (CAKE, in a cakevm guest).
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
		checkTins(t, ks, up)
		if ks.cake {
			compareTinReadings(t, b)
		}
		if dir := os.Getenv("MACAKE_TC_STATS_RECORD"); dir != "" {
			path := filepath.Join(dir, "qdisc-show-s-j.json")
			if ks.cake {
				path = filepath.Join(dir, "cake-qdisc-show-s-j.json")
			}
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

// checkTins: CAKE's shaper carries its tins (diffserv3's three, named as
// tc names them), whose drops are the qdisc's and whose packets are every
// one that entered it (sent, dropped or queued), the datagrams in best
// effort; htb's has none.
func checkTins(t *testing.T, ks kernelShape, s backend.ShaperStats) {
	t.Helper()
	if !ks.cake {
		if s.Tins != nil {
			t.Errorf("htb's shaper has tins: %+v", s.Tins)
		}
		return
	}
	var names []string
	var drops, sent uint64
	for _, tin := range s.Tins {
		names = append(names, tin.Name)
		drops += tin.Drops
		sent += tin.Packets
	}
	if !slices.Equal(names, []string{"bulk", "best_effort", "voice"}) {
		t.Fatalf("tins %q, want diffserv3's bulk, best_effort, voice: %+v", names, s.Tins)
	}
	be := s.Tins[1]
	if drops != s.Drops || sent != s.Packets+s.Drops+s.BacklogPackets || be.Drops == 0 || be.Packets == 0 || be.ThresholdBits != 1_000_000 {
		t.Errorf("tins do not add up to the qdisc's %d drops and %d packets, or best effort at 1 Mbit/s did not carry the datagrams: %+v", s.Drops, s.Packets, s.Tins)
	}
	if be.PeakDelay <= 0 || be.PeakDelay > 10*time.Second {
		t.Errorf("best effort's peak delay %v: not what a full queue at 1 Mbit/s holds", be.PeakDelay)
	}
}

// compareTinReadings: once the queue has drained, the tins read over
// netlink are the ones tc -s -j prints. The kernel's own packets (IPv6
// neighbour discovery, MLD) may still pass between two readings, so the
// netlink reading sits between two of tc's that agree, tried a few times.
func compareTinReadings(t *testing.T, b *Backend) {
	t.Helper()
	ctx := context.Background()
	read := func(netlink bool) []backend.TinStats {
		t.Helper()
		nl := b.Netlink
		if !netlink {
			b.Netlink = nil
		}
		s, err := b.ShaperStats(ctx)
		b.Netlink = nl
		if err != nil {
			t.Fatal(err)
		}
		return s[1].Tins
	}
	var before, viaNL []backend.TinStats
	for range 5 {
		time.Sleep(time.Second)
		before, viaNL = read(false), read(true)
		if after := read(false); !reflect.DeepEqual(before, after) {
			continue // something passed meanwhile
		}
		if reflect.DeepEqual(before, viaNL) {
			return
		}
	}
	t.Errorf("tins over netlink and from tc -s -j differ:\n netlink %+v\n tc      %+v", viaNL, before)
}
