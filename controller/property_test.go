// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
)

// The properties below must hold for any input sequence. A sequence is
// decoded from bytes (so the fuzzer can explore it), 4 bytes per input.

// propertyConfig picks one of several configurations from a byte.
func propertyConfig(sel byte) tuning.Config {
	cfg := exampleConfig()
	cfg.MTU = 1500
	switch sel % 6 {
	case 1:
		cfg.Improvements = tuning.Improvements{MeasuredInterval: true, SleepAtBase: true, ProbeLiveness: true, SurfaceBackendErrors: true, DropCounterResets: true}
	case 2:
		cfg.Mode = tuning.ModeBalanced
		cfg.EngageAfter = time.Second
		cfg.ReleaseAfter = 3 * time.Second
	case 3:
		cfg.MinRatesOnSleep = true
		cfg.SleepAfter = 5 * time.Second
	case 4:
		cfg.Overhead, cfg.MPU = 44, 84
		cfg.Improvements.SurfaceBackendErrors = true
	case 5:
		cfg.Pingers = 2
		cfg.BufferbloatWindow, cfg.BufferbloatVotes = 4, 2
		cfg.Upload.MonitorOnly = true
	}
	return cfg
}

// feeder turns bytes into inputs. twin changes only the upload side of
// the inputs (one-way upload delays and upload byte counts), for the
// independence property.
type feeder struct {
	c      *Controller
	twin   bool
	now    time.Time
	rx, tx uint64
	rxPk   uint64
	lastLd time.Time
}

func (f *feeder) step(op, dt, a, b byte) Output {
	c := f.c
	f.now = f.now.Add(time.Duration(dt%64) * 5 * time.Millisecond)
	n := len(c.pool)
	switch op % 8 {
	case 0, 1, 2:
		// An echo reply from one of the pool's reflectors (maybe a spare,
		// i.e. foreign), sometimes received a while ago.
		at := f.now.Add(-time.Duration(a>>5) * 100 * time.Millisecond)
		addr := reflectorN(int(a) % (n + 1))
		return c.Delay(f.now, RTTSample(addr, at, time.Duration(b)*2*time.Millisecond))
	case 3:
		down := time.Duration(int(a)-60) * time.Millisecond
		upd := time.Duration(int(b)-60) * time.Millisecond
		if f.twin {
			upd = time.Duration(int(255-b)*3) * time.Millisecond
		}
		addr := reflectorN(int(a^b) % n)
		return c.Delay(f.now, DelaySample{Reflector: addr, At: f.now, DownOWD: down, UpOWD: upd, Method: DelayMethod(op>>3) % 2 * 2})
	case 4:
		if a == 255 {
			f.rx = uint64(b) // counter reset
		}
		f.rx += uint64(a) * 2000
		f.rxPk += uint64(a)
		// The upload is never idle (≥ 3000 kbit/s whichever divisor the
		// controller uses) in both twins, so sleep and stall, which look
		// at both directions, decide the same.
		elapsed := max(f.now.Sub(f.lastLd), 200*time.Millisecond)
		f.lastLd = f.now
		upBytes := uint64(elapsed/time.Microsecond)*3000/8000 + uint64(b)*1000
		if f.twin {
			upBytes = uint64(elapsed/time.Microsecond)*3000/8000 + uint64(255-b)*700
		}
		f.tx += upBytes
		return c.Load(f.now, LoadSample{At: f.now, RxBytes: f.rx, TxBytes: f.tx, RxPackets: f.rxPk})
	case 5:
		return c.Tick(f.now)
	case 6:
		var err error
		if a%2 == 0 {
			err = fmt.Errorf("injected")
		}
		c.ReportApply(shape.Direction(b%2), err)
		return Output{}
	default:
		f.now = f.now.Add(time.Duration(a) * time.Second)
		return c.Tick(f.now)
	}
}

// checker tracks what a sequence of outputs must satisfy.
type checker struct {
	t                         *testing.T
	c                         *Controller
	lastCut, lastInc, lastDec [2]int64
}

func newChecker(t *testing.T, c *Controller) *checker {
	ch := &checker{t: t, c: c}
	for d := range 2 {
		ch.lastCut[d], ch.lastInc[d], ch.lastDec[d] = -1e15, -1e15, -1e15
	}
	return ch
}

func (ch *checker) check(step int, out Output) {
	t, c := ch.t, ch.c
	now := c.now
	seen := [2]bool{}
	for _, d := range out.Decisions() {
		if d.Direction != shape.Upload && d.Direction != shape.Download {
			t.Fatalf("step %d: decision for direction %d", step, d.Direction)
		}
		i := d.Direction
		if seen[i] {
			t.Fatalf("step %d: two decisions for %s in one output", step, i)
		}
		seen[i] = true
		dp := c.p.dir[i]
		if dp.monitorOnly {
			t.Fatalf("step %d: decision for monitor-only %s", step, i)
		}
		if d.Rate <= 0 || d.Rate%1000 != 0 || d.Rate > dp.maxK*1000 || (!c.p.compensate && d.Rate < dp.minK*1000) {
			t.Fatalf("step %d: %v outside [%d, %d] kbit/s or not whole kbit/s", step, d, dp.minK, dp.maxK)
		}
		switch d.Reason {
		case ReasonCut:
			if now <= ch.lastCut[i]+c.p.bbRefractory {
				t.Fatalf("step %d: cut at %d µs within %d µs of the previous one at %d", step, now, c.p.bbRefractory, ch.lastCut[i])
			}
			ch.lastCut[i], ch.lastDec[i] = now, now
		case ReasonIncrease:
			if now <= ch.lastCut[i]+c.p.bbRefractory {
				t.Fatalf("step %d: increase at %d µs within the refractory period after the cut at %d", step, now, ch.lastCut[i])
			}
			ch.lastInc[i], ch.lastDec[i] = now, now
		case ReasonDecay, ReasonRecover:
			if now <= ch.lastDec[i]+c.p.decayRefractory {
				t.Fatalf("step %d: decay at %d µs within %d µs of the last rate step at %d", step, now, c.p.decayRefractory, ch.lastDec[i])
			}
			ch.lastDec[i] = now
		case ReasonEngage:
			ch.lastCut[i], ch.lastDec[i] = now, now
		case ReasonNone:
			t.Fatalf("step %d: decision without a reason", step)
		}
	}
	for i := range c.dir {
		ds, dp := &c.dir[i], &c.p.dir[i]
		if ds.rate < dp.minK || ds.rate > dp.maxK {
			t.Fatalf("step %d: %s rate %d outside [%d, %d]", step, shape.Direction(i), ds.rate, dp.minK, dp.maxK)
		}
		if ds.ratio < 1 || ds.ratio > 1_000_000 {
			t.Fatalf("step %d: pipe ratio %d ppm", step, ds.ratio)
		}
		if ds.nDelayed < 0 || ds.nDelayed > c.p.window {
			t.Fatalf("step %d: %d delayed in a window of %d", step, ds.nDelayed, c.p.window)
		}
	}
	if c.counters.DroppedEvents != 0 {
		t.Fatalf("step %d: %d events dropped", step, c.counters.DroppedEvents)
	}
}

// runProperties feeds data to a controller and checks every output; for
// configurations where the directions are independent it also runs a twin
// whose upload inputs differ and requires identical download behaviour.
func runProperties(t *testing.T, data []byte) {
	if len(data) < 1 {
		return
	}
	cfg := propertyConfig(data[0])
	independent := cfg.Mode != tuning.ModeBalanced
	// Reflector comparison and rotation rank reflectors by both
	// directions; take them out for the independence check.
	cfg.ComparisonInterval, cfg.ReplacementInterval = 1000*time.Hour, 1000*time.Hour
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	twin, _ := New(cfg, nil)
	f := &feeder{c: c, now: t0, lastLd: t0}
	g := &feeder{c: twin, now: t0, twin: true, lastLd: t0}
	ch := newChecker(t, c)
	ch.check(-1, c.Start(t0))
	twin.Start(t0)
	for i := 1; i+3 < len(data); i += 4 {
		out := f.step(data[i], data[i+1], data[i+2], data[i+3])
		ch.check(i/4, out)
		_ = c.State()
		tout := g.step(data[i], data[i+1], data[i+2], data[i+3])
		if !independent {
			continue
		}
		a, aok := decision(out, shape.Download)
		b, bok := decision(tout, shape.Download)
		if aok != bok || a != b || c.dir[shape.Download].rate != twin.dir[shape.Download].rate {
			t.Fatalf("step %d: upload inputs changed the download: %v/%v vs %v/%v", i/4, a, aok, b, bok)
		}
	}
}

func FuzzController(f *testing.F) {
	for sel := range byte(6) {
		r := rand.New(rand.NewPCG(uint64(sel), 1))
		data := []byte{sel}
		for range 200 {
			data = append(data, byte(r.IntN(256)), byte(r.IntN(30)), byte(r.IntN(256)), byte(r.IntN(256)))
		}
		f.Add(data)
	}
	f.Add([]byte{0, 4, 40, 200, 200, 0, 10, 20, 100, 7, 255, 255, 255})
	f.Fuzz(runProperties)
}

// TestControllerProperties runs the properties over many seeded random
// sequences, biased toward realistic traffic: mostly responses and load
// samples, bursts of bloat.
func TestControllerProperties(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 50
	}
	for seed := range uint64(n) {
		r := rand.New(rand.NewPCG(seed, 42))
		data := []byte{byte(seed)}
		bloat := false
		for range 600 {
			if r.IntN(40) == 0 {
				bloat = !bloat
			}
			op := byte(r.IntN(6))
			if r.IntN(200) == 0 {
				op = byte(6 + r.IntN(2))
			}
			rtt := byte(20 + r.IntN(10))
			if bloat {
				rtt = byte(60 + r.IntN(150))
			}
			a := byte(r.IntN(6))
			if r.IntN(10) == 0 {
				a = byte(r.IntN(256))
			}
			switch op {
			case 3:
				a, rtt = byte(60+r.IntN(60)), byte(60+r.IntN(int(rtt)))
			case 4:
				a = byte(r.IntN(256))
			}
			data = append(data, op, byte(10), a, rtt)
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runProperties(t, data) })
	}
}
