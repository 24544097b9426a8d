// SPDX-License-Identifier: Apache-2.0

package autoqueue

import (
	"testing"
	"time"

	"github.com/macake/macake/controller/tuning"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate int64
		rtt  time.Duration
		mtu  int
		want int64
	}{
		{"BDP rounded up to KiB", 100_000_000, 20 * time.Millisecond, 1500, 245 * 1024},
		{"BDP below the target", 100_000_000, 10 * time.Millisecond, 1500, 123 * 1024},
		{"target below the BDP", 100_000_000, 50 * time.Millisecond, 1500, 245 * 1024},
		{"floor 4×MTU", 1_000_000, 10 * time.Millisecond, 1500, 6 * 1024},
		{"unknown MTU is 1500", 1_000_000, 10 * time.Millisecond, 0, 6 * 1024},
		{"jumbo floor", 1_000_000, 10 * time.Millisecond, 9000, 36 * 1024},
		{"cap 1023 KB", 1_000_000_000, 100 * time.Millisecond, 1500, 1023 * 1024},
		{"zero rate", 0, 20 * time.Millisecond, 1500, 6 * 1024},
		{"negative RTT: the time floor", 50_000_000, -time.Second, 1500, 31 * 1024},
		{"absurd inputs do not overflow", 1 << 62, 1 << 62, 1500, 1023 * 1024},
		{"exact KiB stays", 409_600_000, time.Second, 1500, 1000 * 1024},
		// Issue 12: a 0.1 ms baseline (a nearby server) made the queue four
		// packets at 400 Mbit/s; the floor is 5 ms at the rate instead.
		{"nearby server: 5 ms at 400 Mbit/s, not 4 packets", 400_000_000, 100 * time.Microsecond, 1500, 245 * 1024},
		{"nearby server: 5 ms at 100 Mbit/s", 100_000_000, 100 * time.Microsecond, 1500, 62 * 1024},
		{"no baseline yet: the time floor", 1_000_000_000, 0, 1500, 611 * 1024},
	} {
		if got := Bytes(tc.rate, tc.rtt, tc.mtu); got != tc.want {
			t.Errorf("%s: Bytes(%d, %v, %d) = %d; want %d", tc.name, tc.rate, tc.rtt, tc.mtu, got, tc.want)
		}
	}
}

// TestSparseReserve: whole full-sized frames, then a frame less a byte
// that no full-sized frame can use but a ping, a call's packet or an ack
// always fits in.
func TestSparseReserve(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue int64
		mtu   int
		want  int64
	}{
		{"6 KiB: four frames and the reserve", 6 * 1024, 1500, 4*1514 + 1513},
		{"exactly four frames", 4 * 1514, 1500, 4*1514 + 1513},
		{"below a frame: one frame", 1000, 1500, 1514 + 1513},
		{"unknown MTU is 1500", 20 * 1024, 0, 13*1514 + 1513},
		{"jumbo frames", 36 * 1024, 9000, 4*9014 + 9013},
	} {
		got := SparseReserve(tc.queue, tc.mtu)
		if got != tc.want {
			t.Errorf("%s: SparseReserve(%d, %d) = %d; want %d", tc.name, tc.queue, tc.mtu, got, tc.want)
		}
		frame := int64(max(tc.mtu, 0)) + EthernetHeader
		if tc.mtu <= 0 {
			frame = tuning.DefaultMTU + EthernetHeader
		}
		if frames := got / frame; got-frames*frame != frame-1 {
			t.Errorf("%s: %d leaves %d bytes beside whole frames, want %d", tc.name, got, got-frames*frame, frame-1)
		}
	}
}

// TestFloorIsATimeAtTheRate: the floor never lets a fast pipe's
// full queue drain in less than MinDrain, and never holds fewer
// than four packets.
func TestFloorIsATimeAtTheRate(t *testing.T) {
	for _, rate := range []int64{64_000, 1_000_000, 10_000_000, 100_000_000, 400_000_000, 1_000_000_000, 10_000_000_000} {
		for _, rtt := range []time.Duration{0, 10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 4 * time.Millisecond} {
			q := Bytes(rate, rtt, 1500)
			drain := time.Duration(float64(q*8) / float64(rate) * float64(time.Second))
			if q < MaxBytes && drain < MinDrain {
				t.Errorf("rate %d, idle RTT %v: queue %d B drains in %v, under %v", rate, rtt, q, drain, MinDrain)
			}
			if q < 4*1500 {
				t.Errorf("rate %d, idle RTT %v: queue %d B is under four packets", rate, rtt, q)
			}
		}
	}
}
