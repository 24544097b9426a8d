// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"
	"time"
)

// benchController is a running controller with six reflectors, loaded
// traffic and some bufferbloat, so the benchmarks exercise cuts, increases
// and health checks rather than an idle fast path.
func benchController(tb testing.TB) (*Controller, *benchFeed) {
	cfg := exampleConfig()
	cfg.MTU = 1500
	cfg.Overhead = 18
	c, err := New(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	c.Start(t0)
	f := &benchFeed{c: c, now: t0}
	for range 2000 {
		f.sample()
	}
	return c, f
}

type benchFeed struct {
	c          *Controller
	now        time.Time
	i          int
	rx, tx, pk uint64
}

// sample is one step of the realistic mix: a response every 50 ms,
// round-robin over the slots, a load sample every fourth step (200 ms),
// bloat in bursts.
func (f *benchFeed) sample() Output {
	f.i++
	f.now = f.now.Add(50 * time.Millisecond)
	if f.i%4 == 0 {
		f.rx += 450_000
		f.tx += 40_000
		f.pk += 320
		f.c.Load(f.now, LoadSample{At: f.now, RxBytes: f.rx, TxBytes: f.tx, RxPackets: f.pk, TxPackets: f.pk})
	}
	rtt := 40 * time.Millisecond
	if f.i%100 < 30 {
		rtt = 120 * time.Millisecond
	}
	p := f.i % len(f.c.slots)
	return f.c.Delay(f.now, RTTSample(f.c.slots[p].addr, f.now, rtt))
}

// BenchmarkDelay is the per-sample hot path: one reflector response.
func BenchmarkDelay(b *testing.B) {
	c, f := benchController(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.i++
		f.now = f.now.Add(50 * time.Millisecond)
		rtt := 40 * time.Millisecond
		if f.i%100 < 30 {
			rtt = 120 * time.Millisecond
		}
		out := c.Delay(f.now, RTTSample(c.slots[f.i%6].addr, f.now, rtt))
		_ = out.Decisions()
		if f.i%4 == 0 { // keep the load fresh outside the measurement's focus
			f.rx += 450_000
			f.tx += 40_000
			c.Load(f.now, LoadSample{At: f.now, RxBytes: f.rx, TxBytes: f.tx})
		}
	}
}

// BenchmarkLoad is one achieved-rate sample.
func BenchmarkLoad(b *testing.B) {
	c, f := benchController(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.now = f.now.Add(200 * time.Millisecond)
		f.rx += 450_000
		f.tx += 40_000
		f.pk += 320
		out := c.Load(f.now, LoadSample{At: f.now, RxBytes: f.rx, TxBytes: f.tx, RxPackets: f.pk, TxPackets: f.pk})
		_ = out.Events()
	}
}

// BenchmarkMix is the realistic input mix (20 responses and 5 load
// samples per second), per response.
func BenchmarkMix(b *testing.B) {
	_, f := benchController(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.sample()
	}
}

// BenchmarkTick is a tick with nothing else happening.
func BenchmarkTick(b *testing.B) {
	c, f := benchController(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.now = f.now.Add(time.Millisecond)
		c.Tick(f.now)
	}
}

// TestHotPathDoesNotAllocate pins the benchmarks' 0 allocs/op: responses,
// load samples and ticks, including cuts, increases and health checks.
func TestHotPathDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	_, f := benchController(t)
	if n := testing.AllocsPerRun(5000, func() { f.sample() }); n != 0 {
		t.Errorf("%v allocations per sample; want 0", n)
	}
	c, f := benchController(t)
	if n := testing.AllocsPerRun(1000, func() { f.now = f.now.Add(time.Millisecond); c.Tick(f.now) }); n != 0 {
		t.Errorf("%v allocations per tick; want 0", n)
	}
}
