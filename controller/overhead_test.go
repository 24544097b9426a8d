// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"
	"time"
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

func TestIdleRTTForQueueSizing(t *testing.T) {
	h := newHarness(t, exampleConfig())
	for i := range 30 {
		h.rtt(float64(10+50*i), i%6, 40*time.Millisecond)
	}
	if got := h.c.State().IdleRTT; got != 40*time.Millisecond {
		t.Errorf("IdleRTT %v; want 40ms after settling", got)
	}
}
