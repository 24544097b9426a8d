// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"
	"time"

	"github.com/macake/macake/controller/tuning"
)

func TestWireBytesFormula(t *testing.T) {
	for _, tc := range []struct {
		name                string
		overhead, mpu       int
		atm                 bool
		bytes, pkts, wantWB int64
	}{
		{"no options", 0, 0, false, 150_000, 100, 150_000},
		{"overhead 40", 40, 0, false, 150_000, 100, 154_000},
		{"mpu lifts small packets", 0, 84, false, 6_400, 100, 8_400},
		{"mpu below packets", 0, 84, false, 150_000, 100, 150_000},
		{"overhead then mpu", 18, 84, false, 6_400, 100, 8_400},
		// 1540 bytes per packet → ⌈1540/48⌉ = 33 cells × 53 = 1749.
		{"ATM", 40, 0, true, 150_000, 100, 174_900},
		{"no packet counts", 40, 0, false, 150_000, 0, 150_000},
	} {
		cfg := exampleConfig()
		cfg.Overhead, cfg.MPU, cfg.ATM = tc.overhead, tc.mpu, tc.atm
		c, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.p.framing.WireBytes(tc.bytes, tc.pkts); got != tc.wantWB {
			t.Errorf("%s: wire bytes %d; want %d", tc.name, got, tc.wantWB)
		}
	}
}

func TestOverheadCompensatesThePipeRate(t *testing.T) {
	cfg := exampleConfig()
	cfg.Overhead = 40
	h := newHarness(t, cfg)
	// Before any packet is seen the ratio assumes 1500-byte packets:
	// 20000 × 1500/1540 = 19480 kbit/s.
	if d, ok := decision(h.lastOut, dn); !ok || d.Rate != 19_480_000 {
		t.Fatalf("start: %v; want 19480 kbit/s", d)
	}
	// 100 packets of 1500 bytes per 200 ms: the achieved rate counts the
	// wire, 154000 bytes → 6160 kbit/s.
	var rx, pk uint64
	feed := func(ms float64, bytes, pkts uint64) {
		rx += bytes
		pk += pkts
		h.c.Load(atMS(ms), LoadSample{At: atMS(ms), RxBytes: rx, RxPackets: pk})
	}
	feed(200, 150_000, 100)
	if st := h.c.State().Download; st.Achieved != 6_160_000 {
		t.Errorf("achieved %d bit/s; want 6160 kbit/s on the wire", st.Achieved)
	}
	// Small packets: 500-byte mean → ratio 500/540; after a few samples the
	// pipe rate follows the observed mean size.
	for i := range 60 {
		feed(400+200*float64(i), 50_000, 100)
	}
	st := h.c.State().Download
	want := st.Rate * 500 / 540
	if d := st.PipeRate - want; d < -2000 || d > 2000 {
		t.Errorf("pipe rate %d for rate %d with 500-byte packets; want ≈ %d (S × 500/540)", st.PipeRate, st.Rate, want)
	}
	if st.PipeRate%1000 != 0 {
		t.Errorf("pipe rate %d is not a whole kbit/s", st.PipeRate)
	}
}

func TestNoOverheadLeavesThePipeRateExact(t *testing.T) {
	h := newHarness(t, exampleConfig())
	var rx, pk uint64
	for i := range 20 {
		rx += 10_000
		pk += 100
		h.c.Load(atMS(200+200*float64(i)), LoadSample{At: atMS(200 + 200*float64(i)), RxBytes: rx, RxPackets: pk})
	}
	st := h.c.State().Download
	if st.PipeRate != st.Rate || st.Achieved != 400_000 {
		t.Errorf("pipe %d, rate %d, achieved %d; want pipe = rate and bytes-only achieved 400 kbit/s", st.PipeRate, st.Rate, st.Achieved)
	}
}

func TestAutoQueueBytes(t *testing.T) {
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
		if got := AutoQueueBytes(tc.rate, tc.rtt, tc.mtu); got != tc.want {
			t.Errorf("%s: AutoQueueBytes(%d, %v, %d) = %d; want %d", tc.name, tc.rate, tc.rtt, tc.mtu, got, tc.want)
		}
	}
}

// TestAutoQueueFloorIsATimeAtTheRate: the floor never lets a fast pipe's
// full queue drain in less than AutoQueueMinDrain, and never holds fewer
// than four packets.
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

func TestAutoQueueFloorIsATimeAtTheRate(t *testing.T) {
	for _, rate := range []int64{64_000, 1_000_000, 10_000_000, 100_000_000, 400_000_000, 1_000_000_000, 10_000_000_000} {
		for _, rtt := range []time.Duration{0, 10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 4 * time.Millisecond} {
			q := AutoQueueBytes(rate, rtt, 1500)
			drain := time.Duration(float64(q*8) / float64(rate) * float64(time.Second))
			if q < MaxAutoQueueBytes && drain < AutoQueueMinDrain {
				t.Errorf("rate %d, idle RTT %v: queue %d B drains in %v, under %v", rate, rtt, q, drain, AutoQueueMinDrain)
			}
			if q < 4*1500 {
				t.Errorf("rate %d, idle RTT %v: queue %d B is under four packets", rate, rtt, q)
			}
		}
	}
}

func TestIdleRTTForQueueSizing(t *testing.T) {
	h := newHarness(t, exampleConfig())
	for i := range 30 {
		h.rtt(float64(10+50*i), i%6, 40*time.Millisecond)
	}
	if got := h.c.State().IdleRTT; got != 40*time.Millisecond {
		t.Errorf("IdleRTT %v; want 40ms after settling", got)
	}
}
