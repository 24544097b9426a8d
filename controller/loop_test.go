// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
)

type setCall struct {
	at   time.Duration // since the loop started
	dir  shape.Direction
	rate int64
}

// recorder is a RateSetter that records calls and fails on demand.
type recorder struct {
	mu      sync.Mutex
	start   time.Time
	calls   []setCall
	failNth map[int]bool // 1-based call numbers that fail

	switchCalls []string
	failEngage  int // number of Engage calls to fail
}

func (r *recorder) SetRate(ctx context.Context, dir shape.Direction, rate int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, setCall{time.Since(r.start), dir, rate})
	if r.failNth[len(r.calls)] {
		return errors.New("dnctl: exit status 1")
	}
	return nil
}

func (r *recorder) snapshot() []setCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]setCall(nil), r.calls...)
}

// switcher is a recorder that can also engage and release (balanced mode).
type switcher struct{ recorder }

func (s *switcher) Engage(ctx context.Context, upBits, downBits int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.switchCalls = append(s.switchCalls, "engage")
	if s.failEngage > 0 {
		s.failEngage--
		return errors.New("pfctl: anchor busy")
	}
	return nil
}

func (s *switcher) Release(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.switchCalls = append(s.switchCalls, "release")
	return nil
}

// link is a fake network for the loop: a prober sending an echo reply
// every 50 ms round-robin, and a counter sampler every 200 ms.
type link struct {
	delays chan DelaySample
	loads  chan LoadSample
	slots  []netip.Addr
}

func newLink(c *Controller) *link {
	return &link{delays: make(chan DelaySample), loads: make(chan LoadSample), slots: c.ActiveReflectors(nil)}
}

// run plays phases: for each, until the given offset from start, echo RTT
// and achieved rates in kbit/s.
func (l *link) run(start time.Time, phases []phase) {
	var rx, tx uint64
	i := 0
	for _, ph := range phases {
		for time.Since(start) < time.Duration(ph.until)*time.Millisecond {
			time.Sleep(50 * time.Millisecond)
			now := time.Now()
			l.delays <- RTTSample(l.slots[i%len(l.slots)], now, ph.rtt)
			i++
			if i%4 == 0 {
				rx += uint64(ph.downK * 25)
				tx += uint64(ph.upK * 25)
				l.loads <- LoadSample{At: now, RxBytes: rx, TxBytes: tx}
			}
		}
	}
	close(l.delays)
	close(l.loads)
}

func startLoop(t *testing.T, cfg tuning.Config, setter RateSetter, onApply func(Decision, error)) (*Loop, *link, chan error) {
	t.Helper()
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	lk := newLink(c)
	l, err := NewLoop(LoopConfig{Controller: c, Setter: setter, Delays: lk.delays, Loads: lk.loads, OnApply: onApply})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(t.Context()) }()
	return l, lk, done
}

func TestLoopAppliesDecisionsHonouringRefractoryPeriods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		_, lk, done := startLoop(t, exampleConfig(), rec, nil)
		lk.run(rec.start, []phase{
			{until: 3000, rtt: cleanRTT, downK: 3000, upK: 3000},   // at base, low load: nothing to send
			{until: 6000, rtt: bloatRTT, downK: 18000, upK: 18000}, // bufferbloat: cuts
			{until: 9000, rtt: cleanRTT, downK: 19000, upK: 19000}, // clean and loaded: increases
		})
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		calls := rec.snapshot()
		if len(calls) < 2 || calls[0].at != 0 || calls[1].at != 0 || calls[0].rate != 20_000_000 || calls[1].rate != 20_000_000 {
			t.Fatalf("start calls %v; want both base rates at once", calls)
		}
		var cuts, ups [2][]setCall
		last := [2]int64{20_000_000, 20_000_000}
		for _, c := range calls[2:] {
			if c.at < 3*time.Second {
				t.Errorf("call %+v while nothing changed", c)
			}
			if c.rate == last[c.dir] {
				t.Errorf("call %+v repeats the applied rate", c)
			}
			if c.rate < last[c.dir] {
				cuts[c.dir] = append(cuts[c.dir], c)
			} else {
				ups[c.dir] = append(ups[c.dir], c)
			}
			last[c.dir] = c.rate
		}
		for d := range 2 {
			if len(cuts[d]) < 3 || len(ups[d]) < 3 {
				t.Fatalf("%s: %d cuts, %d increases; want several of each", shape.Direction(d), len(cuts[d]), len(ups[d]))
			}
			for i := 1; i < len(cuts[d]); i++ {
				if gap := cuts[d][i].at - cuts[d][i-1].at; gap <= 300*time.Millisecond {
					t.Errorf("%s: cuts %v apart; want > 300ms", shape.Direction(d), gap)
				}
			}
			if ups[d][0].at-cuts[d][len(cuts[d])-1].at <= 300*time.Millisecond {
				t.Errorf("%s: increase within 300ms of the last cut", shape.Direction(d))
			}
			// Load samples arrive every 200 ms, just after the response of
			// the same instant: at most one increase per sample.
			sample := func(at time.Duration) time.Duration { return (at - time.Millisecond) / (200 * time.Millisecond) }
			for i := 1; i < len(ups[d]); i++ {
				if sample(ups[d][i].at) == sample(ups[d][i-1].at) {
					t.Errorf("%s: increases at %v and %v on the same achieved-rate sample", shape.Direction(d), ups[d][i-1].at, ups[d][i].at)
				}
			}
		}
	})
}

func TestLoopRetriesAFailedSetRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := exampleConfig()
		cfg.Improvements.SurfaceBackendErrors = true
		rec := &recorder{start: time.Now(), failNth: map[int]bool{3: true}}
		var applyErrs int
		_, lk, done := startLoop(t, cfg, rec, func(d Decision, err error) {
			if err != nil {
				applyErrs++
			}
		})
		lk.run(rec.start, []phase{
			{until: 1000, rtt: cleanRTT, downK: 3000, upK: 3000},
			{until: 1300, rtt: cleanRTT, downK: 19000, upK: 3000}, // one increase
			{until: 1600, rtt: cleanRTT, downK: 3000, upK: 3000},
		})
		<-done
		calls := rec.snapshot()
		if len(calls) < 4 {
			t.Fatalf("calls %v; want the failed increase sent again", calls)
		}
		failed, retry := calls[2], calls[3]
		if retry.dir != failed.dir || retry.rate != failed.rate || retry.at-failed.at != 50*time.Millisecond {
			t.Errorf("failed %+v, then %+v; want the same rate again at the next response", failed, retry)
		}
		if applyErrs != 1 {
			t.Errorf("OnApply saw %d errors; want 1", applyErrs)
		}
	})
}

func TestLoopBalancedEngagesAndReleasesThroughTheSwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := exampleConfig()
		cfg.Mode = tuning.ModeBalanced
		cfg.ReleaseAfter = 2 * time.Second
		sw := &switcher{recorder{start: time.Now(), failEngage: 1}}
		var events []string
		c, _ := New(cfg, nil)
		lk := newLink(c)
		l, _ := NewLoop(LoopConfig{Controller: c, Setter: sw, Delays: lk.delays, Loads: lk.loads,
			OnEvent: func(e Event) { events = append(events, e.String()) }})
		done := make(chan error, 1)
		go func() { done <- l.Run(t.Context()) }()
		lk.run(sw.start, []phase{
			{until: 1000, rtt: cleanRTT, downK: 3000, upK: 3000},
			{until: 6500, rtt: bloatRTT, downK: 18000, upK: 3000},
			{until: 10000, rtt: cleanRTT, downK: 3000, upK: 3000},
		})
		<-done
		sw.mu.Lock()
		defer sw.mu.Unlock()
		if len(sw.switchCalls) != 3 || sw.switchCalls[0] != "engage" || sw.switchCalls[1] != "engage" || sw.switchCalls[2] != "release" {
			t.Errorf("switch calls %v; want a failed engage, its retry, a release", sw.switchCalls)
		}
		if len(events) < 2 || events[len(events)-1] != "latency clean for 2s - releasing shaper" {
			t.Errorf("events %q", events)
		}
		for _, c := range sw.calls {
			if c.at < 5*time.Second {
				t.Errorf("SetRate %+v before the shaper was engaged", c)
			}
		}
	})
}

func TestLoopProbePlanFollowsSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := exampleConfig()
		cfg.SleepAfter = 2 * time.Second
		rec := &recorder{start: time.Now()}
		l, lk, done := startLoop(t, cfg, rec, nil)
		plan := l.ProbePlan()
		if plan.Paused || len(plan.Reflectors) != 6 || plan.Reflectors[0] != reflectorN(0) {
			t.Fatalf("initial plan %+v", plan)
		}
		<-l.ProbeChanges() // the start
		go lk.run(rec.start, []phase{{until: 3000, rtt: cleanRTT}})
		<-l.ProbeChanges()
		if p := l.ProbePlan(); !p.Paused || p.Generation == plan.Generation {
			t.Errorf("after 2 s idle: plan %+v; want paused, new generation", p)
		}
		if st := l.State(); st.Status != StatusSleeping {
			t.Errorf("status %v; want sleeping", st.Status)
		}
		<-done
	})
}

func TestLoopStopsOnCancelOrClosedInputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := New(exampleConfig(), nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, LoopConfig{Controller: c, Setter: &recorder{}}) }()
		time.Sleep(time.Second) // ticks only: no inputs configured
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancel: %v; want context.Canceled", err)
		}
	})
	if _, err := NewLoop(LoopConfig{Setter: &recorder{}}); err == nil {
		t.Errorf("NewLoop without a controller succeeded")
	}
	c, _ := New(exampleConfig(), nil)
	if _, err := NewLoop(LoopConfig{Controller: c}); err == nil {
		t.Errorf("NewLoop without a setter succeeded")
	}
}

func TestLoopTicksDetectAStallWithoutInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := New(exampleConfig(), nil)
		stalled := make(chan time.Duration, 1)
		start := time.Now()
		l, _ := NewLoop(LoopConfig{Controller: c, Setter: &recorder{}, OnEvent: func(e Event) {
			if e.Kind == EventStall {
				stalled <- time.Since(start)
			}
		}})
		go l.Run(t.Context())
		if at := <-stalled; at != 500*time.Millisecond {
			t.Errorf("stall noticed at %v; want at the second 250 ms tick", at)
		}
	})
}
