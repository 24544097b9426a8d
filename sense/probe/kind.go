// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/macake/macake/shape"
)

// Probes other than ICMP (a TCP handshake, a UDP echo) are sent by a
// sender of their kind and family. The prober's scheduler drives a sender
// the way it drives its ICMP sockets: at a reflector's turn it calls send,
// which sends one probe; the sender matches the replies itself (strictly,
// on the reply's source address and port and on a per-prober secret the
// probe carries) and reports how each probe ended, exactly once, through
// the report function it was started with. The prober turns outcomes into
// Samples and counts them, like its own.
type sender interface {
	// send sends one probe, numbered seq, to r at now. An error means
	// nothing was sent: the probe is unreachable at once, and nothing will
	// be reported for it.
	send(r shape.Reflector, seq uint32, now time.Time) error
	// start begins reporting outcomes, from the sender's own goroutines
	// (never from inside send). It is called once, before the first send.
	start(report func(outcome))
	// close stops the sender and waits for its goroutines; outcomes of
	// probes in flight are dropped.
	close()
	// describe says what the sender is, e.g. "tcp4 (raw SYN)" or
	// "udp6 (echo, via en0)".
	describe() string
}

// event is how a non-ICMP probe ended, or what an unexpected reply was.
type event uint8

const (
	evReply       event = iota + 1 // the reflector answered
	evLost                         // no answer within the timeout
	evUnreachable                  // the network said it cannot deliver
	evDuplicate                    // another answer to an answered probe
	evLate                         // an answer after the probe timed out
	evForeign                      // not an answer to any probe of ours
)

// outcome is a sender's report on one probe (or one stray reply).
type outcome struct {
	kind     shape.ProbeKind
	addr     netip.Addr
	seq      uint32
	ev       event
	sent     time.Time
	received time.Time
	err      string
}

// senderKey names a sender: one per kind and family.
type senderKey struct {
	kind shape.ProbeKind
	v6   bool
}

// kindProbes is the prober's state for the non-ICMP kinds: how each
// reflector is probed (from Config.Probes) and the senders opened so far.
// It is guarded by the prober's mutex.
type kindProbes struct {
	probes  map[netip.Addr]shape.Reflector
	senders map[senderKey]sender
	errs    map[senderKey]error
	started bool
}

// init reads Config.Probes.
func (k *kindProbes) init(probes []shape.Reflector) error {
	k.probes = map[netip.Addr]shape.Reflector{}
	k.senders = map[senderKey]sender{}
	k.errs = map[senderKey]error{}
	for _, r := range probes {
		r.Addr = r.Addr.Unmap()
		switch {
		case !r.Addr.IsValid() || r.Addr.IsUnspecified() || r.Addr.IsMulticast():
			return fmt.Errorf("probe: %v is not a unicast address to probe", r.Addr)
		case r.Kind.HasPort() != (r.Port != 0):
			return fmt.Errorf("probe: %s: a %s probe needs a port, and only TCP and UDP have one", r, r.Kind)
		}
		if old, ok := k.probes[r.Addr]; ok && old != r {
			return fmt.Errorf("probe: %s and %s: each address is probed one way", old, r)
		}
		if r.Kind != shape.ProbeICMP {
			k.probes[r.Addr] = r
		}
	}
	return nil
}

// probeFor returns how a is probed: its entry in Config.Probes, else ICMP.
func (k *kindProbes) probeFor(a netip.Addr) shape.Reflector {
	if r, ok := k.probes[a]; ok {
		return r
	}
	return shape.ICMPReflector(a)
}

// senderFor returns the sender of r's kind and family, opening it on
// first use. Called with p.mu held.
func (p *Prober) senderFor(r shape.Reflector) (sender, error) {
	key := senderKey{kind: r.Kind, v6: !r.Addr.Is4()}
	if s := p.k.senders[key]; s != nil {
		return s, nil
	}
	if err := p.k.errs[key]; err != nil {
		return nil, err
	}
	var s sender
	var err error
	switch r.Kind {
	case shape.ProbeTCP:
		s, err = openTCP(key.v6, p.cfg, p.nonce)
	case shape.ProbeUDP:
		s, err = openUDP(key.v6, p.cfg, p.nonce)
	default:
		err = fmt.Errorf("probe kind %s has no sender", r.Kind)
	}
	if err != nil {
		err = fmt.Errorf("probe: %s probes: %w", r.Kind, err)
		p.k.errs[key] = err
		return nil, err
	}
	p.k.senders[key] = s
	if p.k.started {
		s.start(p.kindOutcome)
	}
	return s, nil
}

// startKinds starts the senders opened before Run. Called with p.mu held.
func (p *Prober) startKinds() {
	p.k.started = true
	for _, s := range p.k.senders {
		s.start(p.kindOutcome)
	}
}

// closeKinds closes every sender.
func (p *Prober) closeKinds() {
	p.mu.Lock()
	senders := make([]sender, 0, len(p.k.senders))
	for _, s := range p.k.senders {
		senders = append(senders, s)
	}
	p.mu.Unlock()
	for _, s := range senders {
		s.close()
	}
}

// kindSockets describes the open senders, in a stable order.
func (p *Prober) kindSockets() []string {
	var out []string
	for _, s := range p.k.senders {
		out = append(out, s.describe())
	}
	slices.Sort(out)
	return out
}

// sendKind sends the probe of a reflector probed other than by ICMP.
// Called with p.mu held.
func (p *Prober) sendKind(t *target, now time.Time) {
	t.stats.Sent++
	p.ext++
	m := methodOf(t.probe.Kind)
	s, err := p.senderFor(t.probe)
	if err == nil {
		err = s.send(t.probe, p.ext, now)
	}
	if err != nil {
		t.stats.Unreachable++
		p.deliver(Sample{Reflector: t.addr, Kind: KindUnreachable, Method: m, Seq: uint16(p.ext), Sent: now, Err: err.Error()})
	}
}

// kindOutcome turns a sender's report into a Sample and the counters.
// Outcomes for a reflector that is gone, or is now probed another way,
// are dropped, as the ICMP replies of removed reflectors are.
func (p *Prober) kindOutcome(o outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.ev == evForeign {
		p.foreign++
		return
	}
	t := p.target(o.addr)
	if t == nil || t.probe.Kind != o.kind {
		return
	}
	m := methodOf(o.kind)
	switch o.ev {
	case evReply:
		t.stats.Received++
		t.stats.LastReply = o.received
		p.lastReply = o.received
		p.deliver(Sample{Reflector: t.addr, Kind: KindReply, Method: m, Seq: uint16(o.seq), Sent: o.sent, Received: o.received, RTT: o.received.Sub(o.sent)})
	case evLost:
		t.stats.Lost++
		p.deliver(Sample{Reflector: t.addr, Kind: KindLost, Method: m, Seq: uint16(o.seq), Sent: o.sent})
	case evUnreachable:
		t.stats.Unreachable++
		p.deliver(Sample{Reflector: t.addr, Kind: KindUnreachable, Method: m, Seq: uint16(o.seq), Sent: o.sent, Err: o.err})
	case evDuplicate:
		t.stats.Duplicates++
	case evLate:
		t.stats.Late++
	}
}

// methodOf is the Method of a probe kind.
func methodOf(k shape.ProbeKind) Method {
	switch k {
	case shape.ProbeTCP:
		return MethodTCP
	case shape.ProbeUDP:
		return MethodUDP
	}
	return MethodEcho
}

// bindControl is the Control function of the sockets of the TCP and UDP
// probes: each is bound to Config.Interface (BindControl, as the ICMP
// sockets are), so that its probes leave through the link they measure
// and only that link's answers reach it; nil when the probes follow the
// routing table.
func bindControl(cfg Config) func(network, address string, c syscall.RawConn) error {
	if cfg.Interface == "" {
		return nil
	}
	return BindControl(cfg.Interface)
}

// via is how Stats.Sockets says that a socket is bound: ", via IF", or
// nothing for one that follows the routing table.
func via(iface string) string {
	if iface == "" {
		return ""
	}
	return ", via " + iface
}

// inNetwork runs fn, which opens a socket, where Config.InNetwork says.
func inNetwork(cfg Config, fn func() error) error {
	if cfg.InNetwork != nil {
		return cfg.InNetwork(fn)
	}
	return fn()
}

// tracker is the bookkeeping of a sender whose replies arrive on one
// socket (raw TCP, UDP): the probes in flight by number, their deadlines
// (one timer for all of them, armed for the oldest), and the recently
// finished ones, to tell duplicates and late replies from strangers'.
type tracker struct {
	kind    shape.ProbeKind
	timeout time.Duration

	mu      sync.Mutex
	report  func(outcome)
	pending map[uint32]*inflight
	queue   fifo[*inflight] // send order = deadline order
	recent  map[uint32]finished
	recentQ fifo[uint32]
	timer   *time.Timer
	armed   bool
	closed  bool
}

// inflight is one probe a tracker waits for.
type inflight struct {
	seq      uint32
	to       netip.AddrPort
	sent     time.Time
	deadline time.Time
	done     bool
}

func newTracker(kind shape.ProbeKind, timeout time.Duration) *tracker {
	return &tracker{kind: kind, timeout: timeout, pending: map[uint32]*inflight{}, recent: map[uint32]finished{}}
}

func (tr *tracker) start(report func(outcome)) {
	tr.mu.Lock()
	tr.report = report
	tr.mu.Unlock()
}

// add registers a probe about to be sent (before the send, so that the
// fastest reply finds it).
func (tr *tracker) add(seq uint32, to netip.AddrPort, now time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	in := &inflight{seq: seq, to: to, sent: now, deadline: now.Add(tr.timeout)}
	if old := tr.pending[seq]; old != nil {
		old.done = true // 2³² probes later; the new one wins
	}
	tr.pending[seq] = in
	tr.queue.push(in)
	if !tr.armed && !tr.closed {
		tr.armed = true
		if tr.timer == nil {
			tr.timer = time.AfterFunc(tr.timeout, tr.expire)
		} else {
			tr.timer.Reset(tr.timeout)
		}
	}
}

// cancel forgets a probe whose send failed.
func (tr *tracker) cancel(seq uint32) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if in := tr.pending[seq]; in != nil {
		in.done = true
		delete(tr.pending, seq)
	}
}

// match classifies a reply that claims to answer probe seq and came from
// from at at, and reports it.
func (tr *tracker) match(seq uint32, from netip.AddrPort, at time.Time) {
	o := tr.classify(seq, from, at)
	tr.mu.Lock()
	report := tr.report
	tr.mu.Unlock()
	if report != nil {
		report(o)
	}
}

// stray reports a packet that is no reply to any probe of this prober.
func (tr *tracker) stray() {
	tr.mu.Lock()
	report := tr.report
	tr.mu.Unlock()
	if report != nil {
		report(outcome{kind: tr.kind, ev: evForeign})
	}
}

func (tr *tracker) classify(seq uint32, from netip.AddrPort, at time.Time) outcome {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	o := outcome{kind: tr.kind, addr: from.Addr(), seq: seq, received: at}
	in := tr.pending[seq]
	if in == nil || in.to != from {
		f, ok := tr.recent[seq]
		switch {
		case in != nil || !ok || at.Sub(f.at) >= 4*tr.timeout:
			o.ev = evForeign
		case f.answered:
			o.ev = evDuplicate
		default:
			o.ev = evLate
		}
		return o
	}
	in.done = true
	delete(tr.pending, seq)
	tr.remember(seq, true, at)
	o.ev, o.sent = evReply, in.sent
	return o
}

func (tr *tracker) remember(seq uint32, answered bool, at time.Time) {
	if _, ok := tr.recent[seq]; !ok {
		tr.recentQ.push(seq)
	}
	tr.recent[seq] = finished{answered: answered, at: at}
}

// expire reports the probes past their deadline as lost and arms the
// timer for the next deadline. It runs on the timer's goroutine.
func (tr *tracker) expire() {
	now := time.Now()
	var lost []outcome
	tr.mu.Lock()
	tr.armed = false
	for tr.queue.len() > 0 {
		in := tr.queue.front()
		if !in.done && in.deadline.After(now) {
			break
		}
		tr.queue.pop()
		if in.done {
			continue
		}
		delete(tr.pending, in.seq)
		tr.remember(in.seq, false, now)
		lost = append(lost, outcome{kind: tr.kind, addr: in.to.Addr(), seq: in.seq, ev: evLost, sent: in.sent})
	}
	for tr.recentQ.len() > 0 {
		seq := tr.recentQ.front()
		if f, ok := tr.recent[seq]; ok && now.Sub(f.at) < 4*tr.timeout {
			break
		}
		tr.recentQ.pop()
		delete(tr.recent, seq)
	}
	if tr.queue.len() > 0 && !tr.closed {
		tr.armed = true
		tr.timer.Reset(max(tr.queue.front().deadline.Sub(now), time.Millisecond))
	}
	report := tr.report
	tr.mu.Unlock()
	if report != nil {
		for _, o := range lost {
			report(o)
		}
	}
}

// stop stops the timer; nothing is reported afterwards.
func (tr *tracker) stop() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.closed = true
	tr.report = nil
	if tr.timer != nil {
		tr.timer.Stop()
	}
}

// errClosed is what a sender's send returns after close.
var errClosed = errors.New("probe: sender closed")

// readEach reads packets from pc until it is closed, handing each, with
// the time it arrived, to handle (which must not keep b). A read error
// other than the close (a ping socket's queued ICMP error, EHOSTUNREACH
// and the like) cannot be attributed to a probe, which then times out:
// readEach tells failed (when not nil), stops if it says so, and after a
// few failures in a row backs off, so that a broken socket cannot spin.
func readEach(pc net.PacketConn, handle func(b []byte, from net.Addr, now time.Time), failed func() (stop bool)) {
	buf := make([]byte, 1500)
	failures := 0
	for {
		n, from, err := pc.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if failed != nil && failed() {
				return
			}
			failures++
			if failures > 3 {
				time.Sleep(min(time.Duration(failures)*10*time.Millisecond, time.Second))
			}
			continue
		}
		failures = 0
		handle(buf[:n], from, now)
	}
}
