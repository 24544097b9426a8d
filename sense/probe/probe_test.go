// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/internal/tickgrid"
	"github.com/macake/macake/sense/probe/wire"
)

func newProber(t *testing.T, n *fakeNet, cfg Config) *Prober {
	t.Helper()
	cfg.Listen = n.listen
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runFor runs p for d of (bubble) time and returns every sample it delivered.
func runFor(p *Prober, d time.Duration) []Sample {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	time.Sleep(d)
	cancel()
	<-done
	var out []Sample
	for s := range p.Samples() {
		out = append(out, s)
	}
	return out
}

func count(samples []Sample, k Kind, refl string) int {
	n := 0
	for _, s := range samples {
		if s.Kind == k && (refl == "" || s.Reflector == netip.MustParseAddr(refl)) {
			n++
		}
	}
	return n
}

// sixReflectors are the reflectors of the pacing tests.
var sixReflectors = []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5", "192.0.2.6"}

// echoProber returns an echo-only prober of refl, each of which answers
// after 20 ms on n.
func echoProber(t *testing.T, n *fakeNet, refl []string) *Prober {
	t.Helper()
	for _, r := range refl {
		n.set(r, behaviour{delay: 20 * time.Millisecond})
	}
	return newProber(t, n, Config{Reflectors: configtest.Addrs(refl...), NoTimestamps: true})
}

func TestPacingGivesConfiguredAggregateRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		refl := sixReflectors
		p := echoProber(t, n, refl)
		samples := runFor(p, 3*time.Second-time.Millisecond)
		sent := n.sentTo("")
		// 20 probes a second: 60 in 3 s (the first at t=0, the last
		// before 3 s), two every 100 ms: spread out, as the controller
		// expects its samples, but no more than ten wake-ups a second.
		if len(sent) != 60 {
			t.Fatalf("sent %d probes in 3s, want 60 (20 Hz over 6 reflectors)", len(sent))
		}
		for i := 1; i < len(sent); i++ {
			want := time.Duration(0)
			if i%2 == 0 {
				want = 100 * time.Millisecond
			}
			if gap := sent[i].at.Sub(sent[i-1].at); gap != want {
				t.Fatalf("probe %d came %v after the previous one, want %v (two every 100 ms)", i, gap, want)
			}
		}
		for _, r := range refl {
			got := n.sentTo(r)
			if len(got) != 10 {
				t.Errorf("%s got %d probes, want 10", r, len(got))
			}
			for i := 1; i < len(got); i++ {
				if gap := got[i].at.Sub(got[i-1].at); gap != 300*time.Millisecond {
					t.Errorf("%s: probes %v apart, want 300ms", r, gap)
				}
			}
		}
		if got := count(samples, KindReply, ""); got != 60 {
			t.Errorf("%d replies, want 60", got)
		}
		for _, s := range samples {
			if s.RTT != 20*time.Millisecond || s.Method != MethodEcho || s.OWD {
				t.Fatalf("sample %+v: want an echo reply with RTT 20ms", s)
			}
			if d, u := s.OneWay(); d != 10*time.Millisecond || u != 10*time.Millisecond {
				t.Fatalf("OneWay of an echo = %v/%v, want RTT/2 each", d, u)
			}
		}
	})
}

// TestPaceKeepsEveryReflectorsIntervalWithSendsAtLeast100msApart: each
// reflector is probed every interval whatever their number, and the
// probes go out as few at a time as keep the sends 100 ms apart or more.
func TestPaceKeepsEveryReflectorsIntervalWithSendsAtLeast100msApart(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		reflectors int
		interval   time.Duration
		n          int
		every      time.Duration
	}{
		{1, 300 * ms, 1, 300 * ms},
		{2, 300 * ms, 1, 150 * ms},
		{3, 300 * ms, 1, 100 * ms},
		{4, 300 * ms, 2, 150 * ms},
		{6, 300 * ms, 2, 100 * ms},
		{9, 300 * ms, 3, 100 * ms},
		{6, time.Second, 1, 166666666},
		{6, 100 * ms, 6, 100 * ms},
	} {
		var refl []string
		for i := range c.reflectors {
			refl = append(refl, fmt.Sprintf("192.0.2.%d", i+1))
		}
		p := newProber(t, newFakeNet(), Config{Reflectors: configtest.Addrs(refl...), Interval: c.interval, NoTimestamps: true})
		n, every := p.pace()
		if n != c.n || every != c.every {
			t.Errorf("%d reflectors every %v: %d probes every %v, want %d every %v", c.reflectors, c.interval, n, every, c.n, c.every)
		}
	}
}

// With a Grid, the probes after the first fall on its instants, where the
// caller's other timers fire: the first at once, then every spacing from
// the grid's epoch, however far from it the prober started.
func TestProbesFallOnTheGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		time.Sleep(1234 * time.Millisecond) // the link comes up between two instants
		n := newFakeNet()
		refl := []string{"192.0.2.1", "192.0.2.2"}
		for _, r := range refl {
			n.set(r, behaviour{delay: 20 * time.Millisecond})
		}
		p := newProber(t, n, Config{Reflectors: configtest.Addrs(refl...), NoTimestamps: true, Grid: tickgrid.New(epoch)})
		runFor(p, 2*time.Second)
		sent := n.sentTo("192.0.2.1")
		if len(sent) < 7 || sent[0].at.Sub(epoch) != 1234*time.Millisecond {
			t.Fatalf("%d probes, the first at epoch+%v; want the first at once", len(sent), sent[0].at.Sub(epoch))
		}
		for i, s := range sent[1:] {
			if off := s.at.Sub(epoch) % (300 * time.Millisecond); off != 0 {
				t.Errorf("probe %d at epoch+%v: %v off the 300 ms grid", i+2, s.at.Sub(epoch), off)
			}
		}
		if gap := sent[1].at.Sub(sent[0].at); gap != 266*time.Millisecond {
			t.Errorf("the reflector's second probe came %v after its first, want 266ms (its next grid instant)", gap)
		}
	})
}

// TestPacerWakesOncePerSend: the pacing goroutine wakes once per send
// (two probes with 6 reflectors) and no more: forgetting finished probes
// (after 4× the timeout) and noticing timeouts wait for the next send
// instead of waking it once more. At 20 probes a second each wake-up is
// most of what the prober costs.
func TestPacerWakesOncePerSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		refl := sixReflectors
		p := echoProber(t, n, refl)
		samples := runFor(p, 12*time.Second-time.Millisecond) // past the 8 s memory of finished probes
		sent := len(n.sentTo(""))
		if sent != 240 || count(samples, KindReply, "") != 240 {
			t.Fatalf("sent %d, %d replies; want 240 each", sent, count(samples, KindReply, ""))
		}
		if p.steps > sent/2+2 {
			t.Errorf("the pacer woke %d times for %d probes; want one wake-up per two", p.steps, sent)
		}
		if p.recentQ.len() > 200 {
			t.Errorf("%d finished probes remembered; those older than 8 s should be forgotten", p.recentQ.len())
		}
	})
}

func TestSilentReflectorTimesOutAsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		n.set("192.0.2.1", behaviour{delay: 10 * time.Millisecond})
		n.set("192.0.2.9", behaviour{silent: true})
		p := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1", "192.0.2.9"), Timeout: time.Second, NoTimestamps: true})
		samples := runFor(p, 3*time.Second+time.Millisecond)
		if got := count(samples, KindReply, "192.0.2.9"); got != 0 {
			t.Fatalf("%d replies from a silent reflector", got)
		}
		// A probe every 150 ms, the silent reflector's at 0.15, 0.45, ...,
		// 2.85 s (10); one times out 1 s after it was sent and the next
		// probe notices it, at 1.2, 1.5, ..., 3.0 s: 7 of 10.
		lost := 0
		for _, s := range samples {
			if s.Reflector == netip.MustParseAddr("192.0.2.9") {
				if s.Kind != KindLost || s.RTT != 0 {
					t.Fatalf("silent reflector gave %+v", s)
				}
				lost++
			}
		}
		if lost != 7 {
			t.Errorf("lost = %d, want 7", lost)
		}
		st := p.Stats()
		if st.Reflectors[1].Lost != 7 || st.Reflectors[1].Sent != 10 {
			t.Errorf("stats %+v", st.Reflectors[1])
		}
		if count(samples, KindReply, "192.0.2.1") != 10 {
			t.Errorf("healthy reflector: %d replies, want 10", count(samples, KindReply, "192.0.2.1"))
		}
	})
}

func TestLateAndDuplicateRepliesAreCountedNotDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		n.set("192.0.2.1", behaviour{delay: 1500 * time.Millisecond}) // later than the timeout
		n.set("192.0.2.2", behaviour{delay: 5 * time.Millisecond, duplicates: 2})
		p := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1", "192.0.2.2"), Timeout: time.Second, NoTimestamps: true})
		samples := runFor(p, 3*time.Second-time.Millisecond)
		if got := count(samples, KindReply, "192.0.2.1"); got != 0 {
			t.Errorf("late reflector delivered %d replies", got)
		}
		st := p.Stats()
		late := st.Reflectors[0]
		// Sent at 0, 0.3, ... 2.7 s; the probes (every 150 ms) up to
		// 2.85 s notice the timeouts of those sent by 1.8 s (at 1.05, 1.35,
		// ..., 2.85 s), and the replies of those sent by 1.2 s arrived
		// (1.5 s late) by 3 s.
		if late.Sent != 10 || late.Lost != 7 || late.Late != 5 {
			t.Errorf("late reflector: %+v; want sent 10, lost 7, late 5", late)
		}
		dup := st.Reflectors[1]
		if got := count(samples, KindReply, "192.0.2.2"); got != dup.Sent || dup.Duplicates != 2*dup.Sent {
			t.Errorf("duplicating reflector: %d replies, stats %+v; want one reply and 2 duplicates per probe", got, dup)
		}
		if st.Foreign != 0 {
			t.Errorf("foreign = %d", st.Foreign)
		}
	})
}

func TestSomeoneElsesProbesAreForeign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		n.shared = true // darwin: every ICMP socket sees every reply
		n.set("192.0.2.1", behaviour{delay: 10 * time.Millisecond})
		n.set("192.0.2.2", behaviour{delay: 10 * time.Millisecond, corruptID: true})
		a := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1"), NoTimestamps: true, Socket: SocketRaw})
		b := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1", "192.0.2.2"), NoTimestamps: true, Socket: SocketRaw})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- b.Run(ctx) }()
		sa := runFor(a, 3*time.Second)
		cancel()
		<-done
		var sb []Sample
		for s := range b.Samples() {
			sb = append(sb, s)
		}
		if got := count(sa, KindReply, ""); got != 10 {
			t.Errorf("prober a: %d replies, want its own 10", got)
		}
		if got := count(sb, KindReply, "192.0.2.1"); got != 10 {
			t.Errorf("prober b: %d replies from the shared reflector, want its own 10", got)
		}
		if got := count(sb, KindReply, "192.0.2.2"); got != 0 {
			t.Errorf("prober b accepted %d replies with a wrong identifier", got)
		}
		if fa, fb := a.Stats().Foreign, b.Stats().Foreign; fa < 10 || fb < 10 {
			t.Errorf("foreign counts a=%d b=%d; want each to see the other's replies", fa, fb)
		}
	})
}

func TestTimestampsGiveOneWayDelays(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
	}{
		{"clocks in step", 0},
		{"reflector clock 5s ahead", 5 * time.Second},
		// The bubble starts at midnight UTC, so a clock 1 s behind reads
		// 23:59:59 and every stamp pair straddles midnight.
		{"across midnight", -time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet()
				n.set("192.0.2.1", behaviour{timestamps: true, up: 10 * time.Millisecond, down: 30 * time.Millisecond, delay: 40 * time.Millisecond, clockOffset: tc.offset})
				p := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1"), Socket: SocketRaw})
				samples := runFor(p, 3*time.Second)
				var ts int
				for _, s := range samples {
					if s.Kind != KindReply {
						t.Fatalf("unexpected %+v", s)
					}
					if s.Method != MethodTimestamp {
						continue
					}
					ts++
					if !s.OWD || s.UpOWD-tc.offset != 10*time.Millisecond || s.DownOWD+tc.offset != 30*time.Millisecond || s.RTT != 40*time.Millisecond {
						t.Fatalf("timestamp sample up=%v down=%v rtt=%v; want up 10ms+offset, down 30ms-offset, rtt 40ms", s.UpOWD, s.DownOWD, s.RTT)
					}
				}
				// The first probe is an echo while discovery runs; the
				// rest use timestamps.
				if ts != len(samples)-1 || ts < 8 {
					t.Errorf("%d of %d samples used timestamps", ts, len(samples))
				}
				if m := p.Stats().Reflectors[0].Method; m != MethodTimestamp {
					t.Errorf("method = %v", m)
				}
			})
		})
	}
}

func TestTimestampFallbackToEchoWithoutLosses(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    behaviour
	}{
		{"ignores timestamp requests", behaviour{delay: 20 * time.Millisecond}},
		{"non-standard clock", behaviour{delay: 20 * time.Millisecond, timestamps: true, nonstandard: true, up: 10 * time.Millisecond, down: 10 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet()
				n.set("192.0.2.1", tc.b)
				p := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1"), Socket: SocketRaw})
				samples := runFor(p, 5*time.Second)
				for _, s := range samples {
					if s.Kind != KindReply || s.Method != MethodEcho || s.OWD {
						t.Fatalf("sample %+v; want echo replies only, no losses", s)
					}
				}
				if len(samples) < 16 {
					t.Errorf("%d samples in 5s, want ~17", len(samples))
				}
				var ts int
				for _, s := range n.sentTo("192.0.2.1") {
					if s.typ == wire.TypeTimestamp4 {
						ts++
					}
				}
				if ts == 0 || ts > tsDiscoveryTries {
					t.Errorf("%d timestamp requests sent; want 1..%d discovery probes", ts, tsDiscoveryTries)
				}
				if m := p.Stats().Reflectors[0].Method; m != MethodEcho {
					t.Errorf("method = %v, want echo", m)
				}
			})
		})
	}
}

func TestDatagramSocketsNeverSendTimestampsOnLinux(t *testing.T) {
	if datagramTimestamps {
		t.Skip("this OS allows timestamps on datagram sockets")
	}
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		n.set("192.0.2.1", behaviour{delay: 5 * time.Millisecond, timestamps: true})
		p := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1"), Socket: SocketDatagram})
		samples := runFor(p, time.Second)
		for _, s := range n.sentTo("") {
			if s.typ != wire.TypeEcho4 {
				t.Fatalf("sent ICMP type %d on a datagram socket", s.typ)
			}
		}
		// The fake kernel rewrote the identifier to the socket's port;
		// replies still match.
		if count(samples, KindReply, "") != len(samples) || len(samples) < 3 {
			t.Errorf("samples %+v", samples)
		}
	})
}

func TestUnreachableOnlyListStallsAndNeverReportsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		n.set("198.51.100.1", behaviour{sendErr: &netOpErr{syscall.ENETUNREACH}})
		n.set("198.51.100.2", behaviour{unreachable: true})
		n.set("198.51.100.3", behaviour{silent: true})
		p := newProber(t, n, Config{Reflectors: configtest.Addrs("198.51.100.1", "198.51.100.2", "198.51.100.3"), Timeout: 500 * time.Millisecond, NoTimestamps: true})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		time.Sleep(2 * time.Second)
		if !p.Stalled(time.Now(), time.Second) {
			t.Error("a prober whose reflectors never answer is not stalled")
		}
		cancel()
		<-done
		var unreach, lost int
		for s := range p.Samples() {
			switch s.Kind {
			case KindReply:
				t.Fatalf("reply from an unreachable reflector: %+v", s)
			case KindUnreachable:
				unreach++
				if s.Err == "" || s.RTT != 0 {
					t.Errorf("unreachable sample without a reason or with an RTT: %+v", s)
				}
			case KindLost:
				lost++
			}
		}
		if unreach < 8 || lost < 4 {
			t.Errorf("unreachable=%d lost=%d", unreach, lost)
		}
		if !strings.Contains(p.Stats().Reflectors[0].Reflector.String(), "198.51.100.1") {
			t.Errorf("stats %+v", p.Stats())
		}
	})
}

type netOpErr struct{ errno syscall.Errno }

func (e *netOpErr) Error() string { return "sendto: " + e.errno.Error() }
func (e *netOpErr) Unwrap() error { return e.errno }

func TestSetReflectorsAndPauseAtRunTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		for _, r := range []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"} {
			n.set(r, behaviour{delay: 10 * time.Millisecond})
		}
		p := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1"), NoTimestamps: true})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		time.Sleep(time.Second) // 192.0.2.1 at 0, 0.3, 0.6, 0.9
		if err := p.SetReflectors(configtest.Addrs("192.0.2.2", "2001:db8::1")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		p.SetPaused(true)
		paused := len(n.sentTo(""))
		time.Sleep(time.Second)
		if got := len(n.sentTo("")); got != paused {
			t.Errorf("%d probes sent while paused", got-paused)
		}
		p.SetPaused(false)
		time.Sleep(time.Second)
		if err := p.SetReflectors(configtest.Addrs("0.0.0.0")); err == nil {
			t.Error("unspecified reflector accepted")
		}
		cancel()
		<-done
		if got := len(n.sentTo("192.0.2.1")); got != 4 {
			t.Errorf("old reflector probed %d times, want 4 (none after removal)", got)
		}
		for _, r := range []string{"192.0.2.2", "2001:db8::1"} {
			// 1 s active before the pause and 1 s after, every 300 ms.
			if got := len(n.sentTo(r)); got < 6 || got > 8 {
				t.Errorf("%s probed %d times, want ~7", r, got)
			}
		}
		var v6 int
		for s := range p.Samples() {
			if s.Reflector.Is6() && s.Kind == KindReply {
				v6++
			}
		}
		if v6 < 6 {
			t.Errorf("%d IPv6 replies", v6)
		}
	})
}

func TestSlowConsumerDropsOldestSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		n.set("192.0.2.1", behaviour{delay: time.Millisecond})
		p := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1"), Interval: 100 * time.Millisecond, Buffer: 4, NoTimestamps: true})
		samples := runFor(p, time.Second) // 10 probes, nobody reading
		if len(samples) != 4 {
			t.Fatalf("%d samples buffered, want 4", len(samples))
		}
		if d := p.Stats().Dropped; d != 6 {
			t.Errorf("dropped = %d, want 6", d)
		}
		if samples[3].Seq != 10 || samples[0].Seq != 7 {
			t.Errorf("kept seqs %d..%d, want the newest 7..10", samples[0].Seq, samples[3].Seq)
		}
	})
}

func TestNoSocketGivesActionableError(t *testing.T) {
	n := newFakeNet()
	n.listenErr["udp4"] = syscall.EACCES
	n.listenErr["ip4:icmp"] = syscall.EPERM
	_, err := New(Config{Reflectors: configtest.Addrs("192.0.2.1"), Listen: n.listen})
	if err == nil {
		t.Fatal("New succeeded without sockets")
	}
	for _, want := range []string{"raw ip4:icmp", "root"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if datagramSupported && !strings.Contains(err.Error(), "udp4") {
		t.Errorf("error %q does not mention the datagram socket", err)
	}
	if !errors.Is(err, syscall.EPERM) && !strings.Contains(err.Error(), "not permitted") {
		t.Logf("error: %v", err)
	}
}

// TestSequenceCollisionWithFailedSendKeepsRecordsApart: when a new probe
// takes the sequence number of one still pending and its send fails, the
// old record must leave pending at once: the queue releases it for reuse
// later, and a record reachable from two keys would let a late reply for
// one settle the other.
func TestSequenceCollisionWithFailedSendKeepsRecordsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		n.set("192.0.2.1", behaviour{silent: true})
		p := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1"), Interval: time.Second, Timeout: time.Hour, Socket: SocketRaw})
		defer p.closeSockets()
		p.mu.Lock()
		defer p.mu.Unlock()
		tg := p.targets[0]
		tg.ts = tsFailed // echo only, no discovery probes
		s, err := p.sockFor(tg.addr)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		p.send(s, tg, MethodEcho, false, now) // pending for an hour
		p.seq--                               // the next probe gets the same sequence number...
		n.set("192.0.2.1", behaviour{sendErr: errors.New("no route to host")})
		p.send(s, tg, MethodEcho, false, now) // ...and its send fails
		if len(p.pending) != 0 {
			t.Fatalf("pending still holds %d records after the colliding probe replaced one and failed", len(p.pending))
		}
		p.expire(now) // the queue lets go of the replaced record
		n.set("192.0.2.1", behaviour{silent: true})
		p.send(s, tg, MethodEcho, false, now)
		p.send(s, tg, MethodEcho, false, now)
		seen := map[*pending]pkey{}
		for k, pd := range p.pending {
			if other, dup := seen[pd]; dup {
				t.Fatalf("one record is pending under %v and %v", other, k)
			}
			seen[pd] = k
			if pd.key != k {
				t.Fatalf("pending[%v] holds the record of %v", k, pd.key)
			}
		}
	})
}

// TestReplyAfterTimeoutBetweenSendsIsLate: timeouts are noticed when a
// probe goes out, but a reply that comes after its timeout and before the
// next send is late, never a sample with an RTT above the timeout.
func TestReplyAfterTimeoutBetweenSendsIsLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet()
		n.set("192.0.2.1", behaviour{delay: 1100 * time.Millisecond}) // between the timeout (1 s) and the next send (1.2 s)
		p := newProber(t, n, Config{Reflectors: configtest.Addrs("192.0.2.1"), Timeout: time.Second, NoTimestamps: true})
		samples := runFor(p, 2*time.Second)
		for _, s := range samples {
			if s.Kind == KindReply {
				t.Fatalf("a reply after the timeout was delivered: %+v", s)
			}
		}
		if st := p.Stats().Reflectors[0]; st.Late == 0 || st.Received != 0 {
			t.Errorf("stats %+v, want late replies and none received", st)
		}
	})
}
