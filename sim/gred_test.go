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
		// 60 KiB: a span of 24 KiB makes the linear slope zero: between
		// the thresholds gred never drops (RED on paper: p_b 7.5 % at
		// 30 KiB)…
		{"large queue between the thresholds", 60 << 10, 30 << 10, 1500, 0, 0},
		// …and from 32 KiB the scaled queue wraps in the kernel's int:
		// gred is off on a queue over 30 KiB.
		{"large queue past 32 KiB", 120 << 10, 100 << 10, 1500, 0, 0},
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

// TestGREDAverageDecaysWhileIdle: the average falls by (1−w_q) per idle
// millisecond and is gone after the kernel's 256-step table.
func TestGREDAverageDecaysWhileIdle(t *testing.T) {
	g := &gred{rng: NewStream(1, streamRED)}
	g.configure(10 << 10)
	for i := range 2000 {
		g.drop(4<<10, 1500, int64(i))
	}
	before := g.avg
	g.emptied(0)
	g.drop(0, 1500, int64(10*time.Millisecond))
	if want := float64(before) * 0.98 * 0.98 * 0.98 * 0.98 * 0.98 * 0.98 * 0.98 * 0.98 * 0.98 * 0.98 * 0.98; float64(g.avg) < want*0.98 || float64(g.avg) > want*1.02 {
		t.Errorf("after 10 ms idle the average is %d, want about %.0f (from %d)", g.avg, want, before)
	}
	g.emptied(int64(10 * time.Millisecond))
	g.drop(0, 1500, int64(300*time.Millisecond))
	if g.avg != 0 {
		t.Errorf("after 290 ms idle the average is %d, want 0", g.avg)
	}
}
