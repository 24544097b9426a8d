// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"testing"
	"time"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim/trace"
)

func constLink(down, up int64) *Link {
	mk := func(d shape.Direction, r int64) *trace.Trace {
		return &trace.Trace{Name: d.String(), Direction: d, Rates: []int64{r}, Step: time.Second}
	}
	return &Link{Name: "c", Capacity: [2]*trace.Trace{mk(shape.Upload, up), mk(shape.Download, down)}, BaseRTT: 40 * time.Millisecond}
}

// scripted sets rates at given times.
type scripted struct {
	noShaping
	a     Actuator
	at    []time.Duration
	rates []int64
	i     int
}

func (s *scripted) Start(_ time.Duration, a Actuator) { s.a = a }
func (s *scripted) Tick(now time.Duration) {
	for s.i < len(s.at) && now >= s.at[s.i] {
		s.a.SetRate(shape.Download, s.rates[s.i])
		s.i++
	}
}

func newTestEngine(t *testing.T, l *Link, opt Options, c Controller) *engine {
	t.Helper()
	opt = opt.withDefaults()
	return newEngine(l, opt, NewEnv(l, opt), c)
}

func TestPipeIsDummynet(t *testing.T) {
	var p pipe
	p.rate, p.limit = 1e6, 3000
	for i := range 3 {
		if !p.enqueue(packet{size: 1500}, 0) {
			t.Fatalf("packet %d dropped below the limit", i)
		}
	}
	// 4500 bytes queued > 3000: dummynet drops only once the queue already
	// exceeds the limit.
	if p.enqueue(packet{size: 1500}, 0) || p.drops != 1 {
		t.Fatalf("queue of %d bytes over a %d limit accepted a packet", p.bytes, p.limit)
	}
}

// TestHTBPipeTakesWhatFits: Linux's bfifo drops a packet only when it does
// not fit under the limit, so a full queue still takes a probe, where
// dummynet's takes nothing once it is over.
func TestHTBPipeTakesWhatFits(t *testing.T) {
	for _, kind := range []ShaperKind{ShaperDummynet, ShaperHTB} {
		p := pipe{rate: 1e6, limit: 3100, bfifo: kind == ShaperHTB}
		p.enqueue(packet{size: 1500}, 0)
		p.enqueue(packet{size: 1500}, 0)
		full := p.enqueue(packet{size: 1500}, 0) // 3000 + 1500 > 3100
		probe := p.enqueue(packet{size: probeBytes}, 0)
		if kind == ShaperDummynet && (!full || probe) {
			t.Errorf("dummynet: third segment accepted %v (want true: 3000 ≤ limit), probe over the limit accepted %v (want false)", full, probe)
		}
		if kind == ShaperHTB && (full || !probe) {
			t.Errorf("htb: third segment accepted %v (want false: it does not fit), probe accepted %v (want true: it fits)", full, probe)
		}
	}
	for _, tc := range []struct {
		in   string
		want ShaperKind
		err  bool
	}{{"", ShaperDummynet, false}, {"dummynet", ShaperDummynet, false}, {"htb", ShaperHTB, false}, {"cake", 0, true}} {
		got, err := ParseShaper(tc.in)
		if (err != nil) != tc.err || got != tc.want || (!tc.err && got.String() != map[string]string{"": "dummynet"}[tc.in]+tc.in) {
			t.Errorf("ParseShaper(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestParseOracle: the oracle's share and lag come from its name.
func TestParseOracle(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Oracle
		err  bool
	}{
		{"oracle", Oracle{Share: OracleShare}, false},
		{"oracle-lag0.3", Oracle{Share: OracleShare, Lag: 300 * time.Millisecond}, false},
		{"oracle-frac0.9", Oracle{Share: 0.9}, false},
		{"oracle-frac0.9-lag0.5", Oracle{Share: 0.9, Lag: 500 * time.Millisecond}, false},
		{"oracle-bounded", Oracle{Share: OracleShare, Bounded: true}, false},
		{"oracle-frac0.8-lag0.3-bounded", Oracle{Share: 0.8, Lag: 300 * time.Millisecond, Bounded: true}, false},
		{"oracle-bounded-lag0.3", Oracle{}, true},
		{"oracle-lag0.5-frac0.9", Oracle{}, true},
		{"oracle-frac0", Oracle{}, true},
		{"oracle-frac1.5", Oracle{}, true},
		{"oracle-lag-1", Oracle{}, true},
		{"oracle-lag11", Oracle{}, true},
		{"oracle-fast", Oracle{}, true},
		{"oracles", Oracle{}, true},
	} {
		got, err := ParseOracle(tc.name)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseOracle(%q) = %+v, %v", tc.name, got, err)
		}
		if _, berr := Baseline(tc.name); (berr != nil) != tc.err {
			t.Errorf("Baseline(%q): %v", tc.name, berr)
		}
	}
}

func TestActuationDelayAndReconfigure(t *testing.T) {
	l := constLink(20e6, 20e6)
	c := &scripted{at: []time.Duration{time.Second, 2 * time.Second}, rates: []int64{5_000_999, 0}}
	e := newTestEngine(t, l, Options{Duration: 3 * time.Second, Flows: [2]int{shape.Download: 2}, ActuationDelay: 30 * time.Millisecond}, c)
	e.controlOn = true
	e.start()
	var setAt time.Duration
	for e.now < int64(1500*time.Millisecond) {
		e.step()
		if setAt == 0 && e.pipes[shape.Download].rate != 0 {
			setAt = time.Duration(e.now)
		}
	}
	if setAt < time.Second+30*time.Millisecond || setAt > time.Second+32*time.Millisecond {
		t.Errorf("rate applied at %v; want the 1 s decision plus the 30 ms actuation delay", setAt)
	}
	if got := e.pipes[shape.Download].rate; got != 5_000_000 {
		t.Errorf("rate %d; dnctl takes whole kbit/s", got)
	}
	queued := e.pipes[shape.Download].q.len()
	if queued == 0 {
		t.Fatal("expected a standing queue in a 5 Mbit/s pipe on a 20 Mbit/s link")
	}
	for e.now < int64(2100*time.Millisecond) {
		e.step()
	}
	if e.pipes[shape.Download].rate != 0 || e.pipes[shape.Download].q.len() != 0 {
		t.Errorf("after removing shaping: rate %d, %d packets still queued", e.pipes[shape.Download].rate, e.pipes[shape.Download].q.len())
	}
}

func TestReceiveCounterCountsBeforeThePipe(t *testing.T) {
	l := constLink(20e6, 20e6)
	f, _ := Baseline("fixed")
	opt := Options{Duration: 5 * time.Second, Flows: [2]int{shape.Download: 4}, Seed: 1}
	env := NewEnv(l, opt.withDefaults())
	c, _ := f(env)
	e := newTestEngine(t, l, opt, c)
	e.run()
	p := e.pipes[shape.Download]
	var delivered int64
	for _, b := range e.rec.delivered[shape.Download] {
		delivered += b / 8
	}
	if p.drops == 0 {
		t.Fatal("no pipe drops: the test needs some")
	}
	queued := p.bytes
	if got, want := int64(e.rxBytes), delivered+p.dropBytes+queued; got < want-3000 || got > want+3000 {
		t.Errorf("rx counter %d bytes; want delivered %d + dropped in the pipe %d + queued %d", got, delivered, p.dropBytes, queued)
	}
}

func TestMahimahiScheduleLoopsAndServesPartially(t *testing.T) {
	tr := &trace.Trace{Name: "m", Opportunities: []int64{0, 0, 5, 10}}
	s := newSchedule(tr, 0)
	var got []int64
	for range 7 {
		got = append(got, s.next/int64(time.Millisecond))
		s.advance()
	}
	want := []int64{0, 0, 5, 10, 10, 10, 15} // wraps by the last timestamp
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("opportunities %v, want %v", got, want)
		}
	}
	// A rate series paces 1500-byte slots: 12 Mbit/s is one per ms.
	rs := newSchedule(&trace.Trace{Name: "r", Rates: []int64{12e6}, Step: time.Second}, 0)
	if rs.next != int64(time.Millisecond) {
		t.Errorf("first slot at %d ns, want 1 ms", rs.next)
	}
	rs.seek(int64(10*time.Millisecond) + 1)
	if rs.next != int64(11*time.Millisecond) {
		t.Errorf("after seeking past 10 ms the next slot is at %d ns, want 11 ms (the grid stays)", rs.next)
	}
}

// TestSpuriousTimeoutIsUndone: a timeout fired while the data sat in a deep
// queue; the first ack after it echoes the original transmission, so the
// window comes back (Eifel detection, as Linux's F-RTO undo).
func TestSpuriousTimeoutIsUndone(t *testing.T) {
	s := newSender(Cubic, 4<<20)
	s.cwnd = 40
	for i := range 40 {
		if _, ok := s.next(int64(i)); !ok {
			t.Fatalf("could not send segment %d", i)
		}
	}
	s.onTimeout(int64(time.Second))
	if s.cwnd != 1 || s.lost.len() != 40 {
		t.Fatalf("after the timeout: cwnd %v, %d lost", s.cwnd, s.lost.len())
	}
	// The ack for segment 0 echoes its original send time (0 < 1 s).
	s.onAck(int64(1100*time.Millisecond), 1, -1, 1)
	if s.cwnd < 39 || s.inflight != 39 {
		t.Errorf("after a spurious timeout: cwnd %v, %d in flight; want the window back and the segments in flight", s.cwnd, s.inflight)
	}
	// A genuine timeout (the ack echoes the retransmission) stays.
	g := newSender(Reno, 4<<20)
	g.cwnd = 20
	for i := range 20 {
		g.next(int64(i))
	}
	g.onTimeout(int64(time.Second))
	seq, _ := g.next(int64(time.Second))
	g.onAck(int64(1200*time.Millisecond), seq+1, -1, int64(time.Second))
	if g.cwnd > 3 {
		t.Errorf("after a genuine timeout cwnd %v; want slow start from 1", g.cwnd)
	}
}

func TestRebin(t *testing.T) {
	tr := &trace.Trace{Name: "m", Opportunities: []int64{0, 0, 50, 150, 199, 200}}
	r := tr.Rebin(100 * time.Millisecond)
	if len(r.Rates) != 2 || r.Rates[0] != 3*12000*10 || r.Rates[1] != 2*12000*10 {
		t.Errorf("rebinned %v", r.Rates)
	}
}

// sentAt records when every probe whose reply reached it was sent.
type sentAt struct {
	noShaping
	sent []time.Duration
}

func (s *sentAt) Delay(d DelaySample) { s.sent = append(s.sent, d.Sent) }

// TestProbeBurstSendsThatManyAtOnce: by default the prober sends one probe
// every ProbeInterval / Reflectors, as cake-autorate does; ProbeBurst 2
// sends two at once every 100 ms, as watch's prober does with 6
// reflectors, and 6 all at once every 300 ms (the rounds it sent before).
func TestProbeBurstSendsThatManyAtOnce(t *testing.T) {
	for _, burst := range []int{0, 2, 6} {
		c := &sentAt{}
		e := newTestEngine(t, constLink(10_000_000, 10_000_000), Options{Duration: 2 * time.Second, ProbeBurst: burst}, c)
		e.run()
		instants := map[time.Duration]int{}
		for _, s := range c.sent {
			instants[s]++
		}
		if len(c.sent) < 30 {
			t.Fatalf("burst %d: %d replies in 2 s, want about 40", burst, len(c.sent))
		}
		want := max(burst, 1)
		for at, n := range instants {
			if n != want && at < 1700*time.Millisecond {
				t.Errorf("burst %d: %d probes sent at %v, want %d", burst, n, at, want)
			}
		}
	}
	if err := (Options{Reflectors: 6, ProbeBurst: 7}).Validate(); err == nil {
		t.Error("a burst of 7 of 6 reflectors accepted")
	}
}
