// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"net/netip"
	"testing"
)

// TestTrafficGivesTheReferenceCounters drives the reference's two pipes
// with packets (passing, held in the queue, dropped when it is full, the
// queue drained) and expects `dnctl list` to print the after-traffic
// sample byte for byte: the counters a listing shows come from the queue
// model, not from a test poking the state.
func TestTrafficGivesTheReferenceCounters(t *testing.T) {
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "bw", "780Kbit/s", "delay", "100")
	mustRun(t, e, "", dnctlPath, "pipe", "2", "config", "bw", "330Kbit/s", "delay", "100", "queue", "20Kbytes", "plr", "0.01")
	enableRef(t, e)
	mustRun(t, e, "dummynet in on en0 all pipe 1\ndummynet out on en0 all pipe 2\n", pfctlPath, "-a", "com.apple/test", "-f", "-")
	server, client := netip.MustParseAddrPort("93.184.216.34:443"), netip.MustParseAddrPort("192.168.1.23:52144")
	send := func(out bool, n, total int, held bool) {
		t.Helper()
		src, dst := server, client
		if out {
			src, dst = client, server
		}
		for i := range n {
			size := total / n
			if i < total%n {
				size++
			}
			if r := e.Probe(Packet{Interface: "en0", Out: out, Proto: "tcp", Src: src, Dst: dst, Bytes: size, Held: held}); r.Verdict != Shaped {
				t.Fatalf("packet %d: %+v", i, r)
			}
		}
	}
	// Pipe 1 (50 slots): 1529 packets went through, 3 wait in the queue.
	send(false, 1529, 2187430-3*1460, false)
	send(false, 3, 3*1460, true)
	// Pipe 2 (20 KB): a burst of 35 held 1000-byte packets fills it (21
	// fit, 14 are dropped), the queue drains, and 1175 small packets
	// pass.
	send(true, 35, 35*1000, true)
	if !e.Drain(2) {
		t.Fatal("no pipe 2")
	}
	send(true, 1175, 98422-35*1000, false)
	if got, want := mustRun(t, e, "", dnctlPath, "list").stdout, sample(t, "dnctl-list-after-traffic.txt"); got != want {
		t.Errorf("after traffic:\n%s\nwant:\n%s", got, want)
	}
	if e.Drain(3) {
		t.Error("drained a pipe that does not exist")
	}
}

// TestSlotQueueDropsAtItsSize: a slot queue holds exactly its size in
// packets, whatever their bytes.
func TestSlotQueueDropsAtItsSize(t *testing.T) {
	fs := FlowSet{QSize: 5}
	f := Flow{}
	for range 8 {
		enqueue(&fs, &f, Packet{Bytes: 9000, Held: true})
	}
	if f.Len != 5 || f.LenBytes != 45000 || f.Drops != 3 {
		t.Errorf("5-slot queue after 8 held packets: %d queued (%d bytes), %d drops", f.Len, f.LenBytes, f.Drops)
	}
	enqueue(&fs, &f, Packet{Bytes: 100})
	if f.Len != 5 || f.Drops != 3 {
		t.Errorf("a packet that is not held changed the queue: %+v", f)
	}
}
