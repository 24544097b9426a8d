// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"testing"
	"time"
)

// redDropShare holds a gred's queue at queued bytes and returns the share
// of size-byte arrivals it drops early.
func redDropShare(limit, queued, size int64) float64 {
	g := &gred{rng: NewStream(1, streamRED)}
	if !g.configure(limit) {
		return 0
	}
	drops := 0
	const n = 200000
	for i := range n {
		if g.drop(queued, size, int64(i)*int64(time.Microsecond)) {
			drops++
		}
	}
	return float64(drops) / n
}

// TestGREDIsTheKernelsArithmetic: the early drops the twin credits gred
// with are the ones the macOS kernel's fixed-point RED makes on a byte
// queue, not RED's on paper.
func TestGREDIsTheKernelsArithmetic(t *testing.T) {
	tests := []struct {
		name                string
		limit, queued, size int64
		atLeast, atMost     float64
	}{
		// 10 KiB: min_th 2,048, max_th 6,144 bytes; the slope 6,553/4,096
		// truncates to 1, so a queue at 4 KiB has p_b = 2,048/65,536 =
		// 3.1 % (5 % on paper), and the count, which spreads the drops
		// evenly, drops about twice p_b.
		{"small queue, full frames", 10 << 10, 4 << 10, 1500, 0.05, 0.07},
		// The probability is scaled by the length: a 200-byte packet of a
		// call meets 2/15 of it.
		{"small queue, a call's packets", 10 << 10, 4 << 10, 200, 0.006, 0.010},
		// Below min_th nothing is dropped.
		{"below min_th", 10 << 10, 1 << 10, 1500, 0, 0},
		// 20 KiB: a span of 8 KiB makes the linear slope zero: between
		// the thresholds gred never drops (RED on paper: p_b 3.75 % at
		// 10 KiB)…
		{"a span over 6.5 KB between the thresholds", 20 << 10, 10 << 10, 1500, 0, 0},
		// …but above max_th the gentle slope still drops.
		{"30 KiB above max_th", 30 << 10, 20 << 10, 1500, 0.15, 0.35},
		// From 32 KiB the scaled queue wraps in the kernel's int: gred
		// is off on a queue over 30 KiB.
		{"gred is off above 30 KiB", 60 << 10, 40 << 10, 1500, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redDropShare(tt.limit, tt.queued, tt.size)
			if got < tt.atLeast || got > tt.atMost {
				t.Errorf("drops %.4f of the packets, want %.3f–%.3f", got, tt.atLeast, tt.atMost)
			}
		})
	}
}

// TestGREDAverageRestartsAfterIdle: the kernel decays the average over an
// idle gap with a 32-bit unsigned product that wraps, so after any gap
// the average is under one byte; past the table it is zero.
func TestGREDAverageRestartsAfterIdle(t *testing.T) {
	g := &gred{rng: NewStream(1, streamRED)}
	g.configure(10 << 10)
	for i := range 2000 {
		g.drop(4<<10, 1500, int64(i))
	}
	if g.avg < 3<<10<<redScale {
		t.Fatalf("the average is %d bytes after a long busy spell at 4 KiB, want near 4096", g.avg>>redScale)
	}
	g.emptied(0)
	g.drop(0, 1500, int64(10*time.Millisecond))
	if g.avg >= 1<<redScale || g.avg < 0 {
		t.Errorf("after 10 ms idle the scaled average is %d, want under one byte (%d) as the kernel's wrapping product leaves it", g.avg, 1<<redScale)
	}
	g.avg = 1000 // a fraction of a byte decays without wrapping
	g.emptied(int64(10 * time.Millisecond))
	g.drop(0, 1500, int64(12*time.Millisecond))
	if g.avg <= 900 || g.avg >= 1000 {
		t.Errorf("a small average after 2 ms idle is %d, want (1−w_q)^3 of 1000", g.avg)
	}
	g.emptied(int64(12 * time.Millisecond))
	g.drop(0, 1500, int64(300*time.Millisecond))
	if g.avg != 0 {
		t.Errorf("after 288 ms idle the average is %d, want 0", g.avg)
	}
}
