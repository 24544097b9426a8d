// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/shape"
)

// trackerLog collects a tracker's reports.
type trackerLog struct {
	mu  sync.Mutex
	out []outcome
}

func (l *trackerLog) report(o outcome) {
	l.mu.Lock()
	l.out = append(l.out, o)
	l.mu.Unlock()
}

func (l *trackerLog) events() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ev []event
	for _, o := range l.out {
		ev = append(ev, o.ev)
	}
	return ev
}

// TestTrackerMatchesStrictly: a reply counts once, from the probe's own
// address and port; a second copy is a duplicate, one after the timeout
// is late, anything else is foreign, and unanswered probes are lost when
// their time is up, each exactly once.
func TestTrackerMatchesStrictly(t *testing.T) { synctest.Test(t, testTrackerMatchesStrictly) }

func testTrackerMatchesStrictly(t *testing.T) {
	var log trackerLog
	tr := newTracker(shape.ProbeTCP, 80*time.Millisecond)
	tr.start(log.report)
	defer tr.stop()
	to := netip.MustParseAddrPort("192.0.2.1:443")
	t0 := time.Now()
	tr.add(1, to, t0)
	tr.add(2, to, t0)
	tr.add(3, to, t0)
	tr.match(1, netip.MustParseAddrPort("192.0.2.1:444"), t0.Add(time.Millisecond)) // another port
	tr.match(1, netip.MustParseAddrPort("192.0.2.9:443"), t0.Add(time.Millisecond)) // another host
	tr.match(9, to, t0.Add(time.Millisecond))                                       // no such probe
	tr.match(1, to, t0.Add(2*time.Millisecond))                                     // the answer
	tr.match(1, to, t0.Add(3*time.Millisecond))                                     // its copy
	tr.cancel(3)                                                                    // its send failed
	time.Sleep(200 * time.Millisecond)                                              // 2 times out
	synctest.Wait()
	tr.match(2, to, time.Now()) // too late
	want := []event{evForeign, evForeign, evForeign, evReply, evDuplicate, evLost, evLate}
	got := log.events()
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	log.mu.Lock()
	reply, lost := log.out[3], log.out[5]
	log.mu.Unlock()
	if reply.seq != 1 || reply.addr != to.Addr() || reply.received.Sub(reply.sent) != 2*time.Millisecond {
		t.Errorf("reply %+v", reply)
	}
	if lost.seq != 2 || lost.addr != to.Addr() || !lost.received.IsZero() {
		t.Errorf("loss %+v", lost)
	}
}

// TestTrackerStopsReporting: after stop nothing is reported, not even the
// probes whose time runs out later.
func TestTrackerStopsReporting(t *testing.T) { synctest.Test(t, testTrackerStopsReporting) }

func testTrackerStopsReporting(t *testing.T) {
	var log trackerLog
	tr := newTracker(shape.ProbeUDP, 30*time.Millisecond)
	tr.start(log.report)
	tr.add(1, netip.MustParseAddrPort("192.0.2.1:7"), time.Now())
	tr.stop()
	time.Sleep(80 * time.Millisecond)
	synctest.Wait()
	tr.match(1, netip.MustParseAddrPort("192.0.2.1:7"), time.Now())
	if ev := log.events(); len(ev) != 0 {
		t.Errorf("reported %v after stop", ev)
	}
}

func TestSYNRoundTrip(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1")
	var b [tcpHeaderLen]byte
	syn := putSYN(b[:], src, dst, 40000, 443, 0xdeadbeef)
	seg, ok := parseSegment(syn)
	if !ok || seg.sport != 40000 || seg.dport != 443 || seg.seq != 0xdeadbeef || seg.flags != tcpSYN || seg.answers() {
		t.Fatalf("SYN reads back as %+v", seg)
	}
	// A correct wire.Checksum sums, with the pseudo-header, to zero.
	if c := tcpChecksum(src, dst, syn); c != 0 {
		t.Errorf("wire.Checksum over the SYN is %#04x, want 0", c)
	}
	src6, dst6 := netip.MustParseAddr("fd78::2"), netip.MustParseAddr("fd78::1")
	if c := tcpChecksum(src6, dst6, putSYN(b[:], src6, dst6, 1, 2, 3)); c != 0 {
		t.Errorf("IPv6 wire.Checksum over the SYN is %#04x, want 0", c)
	}
	for flags, answers := range map[byte]bool{tcpSYN | tcpACK: true, tcpRST | tcpACK: true, tcpRST: false, tcpACK: false, tcpSYN: false, tcpSYN | tcpRST | tcpACK: false, tcpFIN | tcpACK: false} {
		if got := (segment{flags: flags}).answers(); got != answers {
			t.Errorf("flags %#02x: answers %v, want %v", flags, got, answers)
		}
	}
	if _, ok := parseSegment(syn[:19]); ok {
		t.Error("a 19-byte segment parsed")
	}
}

func TestISNNamesTheProbe(t *testing.T) {
	for _, c := range []struct{ secret, seq uint32 }{{0, 1}, {0xffffffff, 1}, {0x12345678, 0xfffffff0}} {
		ack := isnOf(c.secret, c.seq) + 1 // what a SYN-ACK or RST acknowledges
		if got := ack - 1 - c.secret; got != c.seq {
			t.Errorf("secret %#x seq %d: the acknowledgement names probe %d", c.secret, c.seq, got)
		}
	}
}

// TestOutcomeAfterStopIsDropped: a TCP or UDP sender's lost-probe timer
// runs on its own goroutine and can report while Run is stopping; that
// outcome must be dropped, not sent on the samples channel Run closed
// (a panic in the daemon). The race detector caught the window in CI.
func TestOutcomeAfterStopIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The fake network has no TCP or UDP: the outcome is handed in as
		// the sender's timer would hand it, for a reflector of the kind
		// the prober probes.
		a := netip.MustParseAddr("192.0.2.7")
		p := newProber(t, newFakeNet(), Config{Reflectors: []netip.Addr{a}, NoTimestamps: true, Timeout: time.Hour})
		runFor(p, 10*time.Millisecond)
		p.kindOutcome(outcome{kind: shape.ProbeICMP, addr: a, seq: 1, ev: evLost, sent: time.Now()})
		if st := p.Stats(); st.Reflectors[0].Lost != 1 {
			t.Errorf("lost = %d, want the late outcome counted once", st.Reflectors[0].Lost)
		}
	})
}
