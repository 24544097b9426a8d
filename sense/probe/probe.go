// SPDX-License-Identifier: Apache-2.0

// Package probe measures latency to a set of reflectors with ICMP: echo
// requests over IPv4 and IPv6, and ICMP timestamp requests (type 13) where a
// reflector answers them, which give the delay of each direction separately.
// Reflectors named in Config.Probes are probed another way, for networks
// that treat ICMP unlike the user's traffic: a TCP handshake to a port
// (SYN to SYN-ACK or RST; tcp.go) or a UDP echo (udp.go).
//
// A [Prober] spreads its probes over the interval: each reflector every
// [Config.Interval], round robin, as few at a time as keeps sends at least
// 100 ms apart (6 reflectors every 300 ms: two every 100 ms; cake-autorate
// sends one every 50 ms). The controller counts on samples that come
// spread out: its stall timeout is five of upstream's 50 ms spacings, it
// raises a rate at most once per load sample and only on a reply, and its
// cut refractory is shorter than the interval. Sent in rounds (all six at
// once every 300 ms, which saved wake-ups), replies came as one burst a
// round, an idle link "stalled" between bursts, and the rate climbed back
// from a cut at two thirds of its pace (docs/MEASUREMENTS.md, "Probe
// rounds"). Timeouts are checked when probes go out, so a lost probe is
// reported at most one send after its timeout and no timer fires between
// sends. Every probe
// ends as exactly one [Sample] on [Prober.Samples]: a reply, a loss
// (timeout) or an unreachable report. The channel never blocks the prober:
// when the consumer falls behind, the oldest sample is dropped and counted.
//
// Replies are matched on source, identifier, sequence number and, for echo,
// a per-prober random nonce in the payload, because on darwin every ICMP
// socket on the host sees every reply and on Linux the kernel rewrites the
// identifier. Duplicates, replies after the timeout and other programs'
// replies are counted, never delivered.
//
// The reflector set can be replaced at run time ([Prober.SetReflectors]) and
// probing paused ([Prober.SetPaused]), which is how the controller retires
// misbehaving reflectors and stops probing while the link sleeps.
package probe

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/internal/tickgrid"
	"github.com/macake/macake/sense/probe/wire"
	"github.com/macake/macake/shape"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Defaults for [Config].
const (
	DefaultTimeout = 2 * time.Second
	DefaultBuffer  = 1024
)

// DefaultInterval is the per-reflector probe interval when Config gives
// none: the controller's (cake-autorate's reflector_ping_interval_s), whose
// one home is config.Defaults.
var DefaultInterval = config.Defaults.Autorate.ProbeInterval.Std()

// Kind says how a probe ended.
type Kind uint8

// The ways a probe ends.
const (
	// KindReply: the reflector answered; RTT (and maybe one-way delays) are set.
	KindReply Kind = iota + 1
	// KindLost: no answer within the timeout.
	KindLost
	// KindUnreachable: the probe could not be sent, or an ICMP error
	// (destination unreachable, time exceeded) came back for it.
	KindUnreachable
)

// String returns "reply", "lost" or "unreachable".
func (k Kind) String() string {
	switch k {
	case KindReply:
		return "reply"
	case KindLost:
		return "lost"
	case KindUnreachable:
		return "unreachable"
	}
	return "unknown"
}

// Method is the kind of ICMP request a probe used.
type Method uint8

// The probe methods.
const (
	// MethodEcho is an echo request: round-trip time only.
	MethodEcho Method = iota + 1
	// MethodTimestamp is an ICMP timestamp request: round trip plus the
	// reflector's receive and transmit clocks, hence one-way delays.
	MethodTimestamp
	// MethodTCP times a TCP handshake: SYN to SYN-ACK, or to the RST of
	// a closed port.
	MethodTCP
	// MethodUDP times a UDP datagram's echo.
	MethodUDP
)

// String returns "echo", "timestamp", "tcp" or "udp".
func (m Method) String() string {
	switch m {
	case MethodEcho:
		return "echo"
	case MethodTimestamp:
		return "timestamp"
	case MethodTCP:
		return "tcp"
	case MethodUDP:
		return "udp"
	}
	return "unknown"
}

// Sample is the outcome of one probe.
type Sample struct {
	Reflector netip.Addr
	Kind      Kind
	Method    Method
	// Seq is the ICMP sequence number the probe carried.
	Seq uint16
	// Sent is when the probe left (with a monotonic reading).
	Sent time.Time
	// Received is when the reply arrived; zero unless Kind is KindReply.
	Received time.Time
	// RTT is Received - Sent, measured on the local clock; zero unless
	// Kind is KindReply.
	RTT time.Duration
	// OWD tells whether UpOWD and DownOWD come from ICMP timestamps. They
	// include the unknown offset between the two hosts' clocks (with
	// opposite signs) and have 1 ms resolution, so only their changes
	// against a per-reflector baseline mean anything.
	OWD     bool
	UpOWD   time.Duration
	DownOWD time.Duration
	// Err says why the probe was unreachable (KindUnreachable only).
	Err string
}

// OneWay returns the downstream and upstream delays: the measured one-way
// delays when the probe was a timestamp exchange, otherwise half the round
// trip for each, as cake-autorate does for echo-based methods. Only
// meaningful for KindReply.
func (s Sample) OneWay() (down, up time.Duration) {
	if s.OWD {
		return s.DownOWD, s.UpOWD
	}
	return s.RTT / 2, s.RTT / 2
}

// SocketMode chooses between unprivileged datagram sockets and raw sockets.
type SocketMode uint8

// The socket modes.
const (
	// SocketAuto uses datagram sockets where the OS allows them and raw
	// sockets otherwise. On Linux, when raw sockets are available (root),
	// IPv4 uses a raw socket so that ICMP timestamps can be sent.
	SocketAuto SocketMode = iota
	// SocketDatagram uses only unprivileged datagram ("ping") sockets.
	SocketDatagram
	// SocketRaw uses only raw sockets (root or CAP_NET_RAW).
	SocketRaw
)

// Config configures a [Prober]. The zero value of every field but
// Reflectors means its default.
type Config struct {
	// Reflectors are the addresses to probe; may be empty (nothing is sent
	// until SetReflectors gives some).
	Reflectors []netip.Addr
	// Interval is the time between two probes to the same reflector
	// (default 300 ms).
	Interval time.Duration
	// Timeout is how long a probe waits for its reply before it counts as
	// lost (default 2 s). Bufferbloat can hold replies for a second or
	// more, so keep it well above the worst queueing delay you want to see.
	Timeout time.Duration
	// NoTimestamps disables ICMP timestamp requests: echo only.
	NoTimestamps bool
	// Socket chooses the socket kind (default SocketAuto).
	Socket SocketMode
	// Buffer is the capacity of the Samples channel (default 1024).
	Buffer int
	// Interface, when set, sends every probe out of this interface and
	// takes replies only from it (SO_BINDTODEVICE on Linux, IP_BOUND_IF and
	// IPV6_BOUND_IF on macOS), so that a link measures its own path
	// instead of the default route's: the ICMP sockets (unless Listen
	// opens them), the TCP probes' raw socket or each connect()'s socket,
	// and the UDP probes' socket. "" follows the routing table.
	Interface string
	// Listen opens an ICMP socket; network is "udp4", "udp6", "ip4:icmp" or
	// "ip6:ipv6-icmp". Default: icmp.ListenPacket. Tests replace it, e.g. to
	// open the socket inside another network namespace.
	Listen func(network, address string) (net.PacketConn, error)
	// Probes says how to probe the reflectors that are not probed with
	// ICMP: a TCP handshake or a UDP echo to a port (shape.Reflector). A
	// reflector whose address is not in it is probed with ICMP. Each
	// address is probed one way.
	Probes []shape.Reflector
	// Grid, when set, puts the probes after the first on its instants,
	// so that they fire together with the caller's other timers on the
	// same grid (the daemon's counter reads) instead of waking the
	// process at instants of their own. The zero Grid paces probes from
	// the first.
	Grid tickgrid.Grid
	// InNetwork runs fn, which opens a socket for a TCP or UDP probe (or,
	// for TCP probes timed with connect(), a whole handshake), where the
	// probes must run. Default: it just runs fn. Tests pass a network
	// namespace's Do.
	InNetwork func(fn func() error) error
}

// ReflectorStats counts what happened to one reflector's probes.
type ReflectorStats struct {
	Reflector netip.Addr
	// Method is the method currently used for this reflector.
	Method Method
	// Sent counts probes sent (timestamp discovery probes not included).
	Sent int
	// Received counts replies delivered as samples.
	Received int
	// Lost counts probes that timed out.
	Lost int
	// Unreachable counts probes that could not be sent or drew an ICMP error.
	Unreachable int
	// Duplicates counts extra replies to an already answered probe.
	Duplicates int
	// Late counts replies that arrived after their probe timed out.
	Late int
	// LastReply is when the last reply arrived (zero if none).
	LastReply time.Time
}

// Stats is a snapshot of a prober's counters.
type Stats struct {
	// Reflectors holds the current reflectors, in probing order.
	Reflectors []ReflectorStats
	// Foreign counts replies that belong to someone else's probes.
	Foreign int
	// Dropped counts samples discarded because the consumer fell behind.
	Dropped int
	// ReadErrors counts failed socket reads.
	ReadErrors int
	// LastReply is when any reflector last answered (zero if none).
	LastReply time.Time
	// Sockets describes the open sockets, e.g. "udp4 (datagram)" or
	// "ip4:icmp (raw, via en0)".
	Sockets []string
}

// tsState is a reflector's ICMP timestamp capability as learned so far.
type tsState uint8

const (
	tsUnknown tsState = iota // discovery probes in flight; echo carries the samples
	tsWorks                  // timestamps answered; timestamp probes carry the samples
	tsFailed                 // no standard timestamp answers; echo only, rediscover now and then
)

// Discovery tuning: a reflector that leaves this many discovery probes
// unanswered is treated as not answering timestamps; one whose timestamp
// probes go unanswered this many times in a row is re-checked with echo;
// a failed reflector is re-tried every tsRetryEvery probes.
const (
	tsDiscoveryTries = 3
	tsMaxMisses      = 10
	tsRetryEvery     = 200
)

type target struct {
	addr netip.Addr
	// dst is addr as its socket's WriteTo wants it, built once.
	dst      net.Addr
	ts       tsState
	tsTries  int // timestamp discovery probes sent
	tsMisses int // consecutive unanswered timestamp probes (discovery or real)
	sinceTry int // echo probes since timestamps failed
	stats    ReflectorStats
	// probe is how the reflector is probed: ICMP, or a kind of kind.go.
	probe shape.Reflector
}

func (t *target) method() Method {
	if t.probe.Kind != shape.ProbeICMP {
		return methodOf(t.probe.Kind)
	}
	if t.ts == tsWorks {
		return MethodTimestamp
	}
	return MethodEcho
}

type pkey struct {
	addr netip.Addr
	seq  uint16
}

type pending struct {
	key       pkey
	method    Method
	discovery bool // a timestamp discovery probe: learns capability, yields no sample
	ext       uint32
	orig      uint32
	sent      time.Time
	deadline  time.Time
	done      bool
}

type finished struct {
	answered bool // answered (a further reply is a duplicate) or timed out (late)
	at       time.Time
}

type sock struct {
	pc       net.PacketConn
	network  string
	v6, dgrm bool
	// wireID is the identifier replies carry; matchID is false when it is
	// unknown (a rewriting kernel whose local port cannot be read).
	wireID  uint16
	matchID bool
	ts      bool // timestamp requests possible on this socket
}

// Prober sends ICMP probes to reflectors and delivers a Sample per probe.
// Create it with [New], start it with [Prober.Run].
type Prober struct {
	cfg     Config
	id      uint16
	nonce   uint64
	samples chan Sample
	wake    chan struct{}

	mu          sync.Mutex
	socks       [2]*sock // [0] IPv4, [1] IPv6
	sockErr     [2]error
	k           kindProbes // the senders of the other kinds (kind.go)
	targets     []*target
	retired     map[netip.Addr]*target // stats and capability of removed reflectors, for reuse
	rr          int
	nextSend    time.Time
	paused      bool
	activeSince time.Time
	seq         uint16
	ext         uint32
	pending     map[pkey]*pending
	queue       fifo[*pending] // send order = deadline order
	free        []*pending     // finished probes' records, for reuse
	tx          [8 + wire.PayloadLen]byte
	recent      map[pkey]finished
	recentQ     fifo[pkey]
	foreign     int
	dropped     int
	readErrs    int
	steps       int // wake-ups of the pacing goroutine (tests)
	lastReply   time.Time
	running     bool
	closed      bool
	readers     sync.WaitGroup
}

// New validates cfg and opens the sockets its reflectors need. The error
// says which socket failed and how to allow it.
func New(cfg Config) (*Prober, error) {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Interval < time.Millisecond || cfg.Timeout < time.Millisecond || cfg.Buffer < 0 {
		return nil, fmt.Errorf("probe: interval (%v), timeout (%v) and buffer (%d) must be positive", cfg.Interval, cfg.Timeout, cfg.Buffer)
	}
	switch {
	case cfg.Listen == nil && cfg.Interface != "":
		cfg.Listen = listenOn(cfg.Interface)
	case cfg.Listen == nil:
		cfg.Listen = func(network, address string) (net.PacketConn, error) {
			return icmp.ListenPacket(network, address)
		}
	}
	var r [10]byte
	if _, err := crand.Read(r[:]); err != nil {
		return nil, fmt.Errorf("probe: random identifier: %w", err)
	}
	p := &Prober{
		cfg:     cfg,
		id:      binary.BigEndian.Uint16(r[:2]),
		nonce:   binary.BigEndian.Uint64(r[2:]),
		samples: make(chan Sample, cfg.Buffer),
		wake:    make(chan struct{}, 1),
		retired: map[netip.Addr]*target{},
		pending: map[pkey]*pending{},
		recent:  map[pkey]finished{},
	}
	if err := p.k.init(cfg.Probes); err != nil {
		return nil, err
	}
	if err := p.SetReflectors(cfg.Reflectors); err != nil {
		p.closeSockets()
		return nil, err
	}
	return p, nil
}

// Samples returns the channel of probe outcomes. It is closed when Run
// returns.
func (p *Prober) Samples() <-chan Sample { return p.samples }

// SetReflectors replaces the set of reflectors. Reflectors that stay keep
// their state; probes in flight to removed ones are forgotten (their replies
// are ignored). An empty list stops probing. Invalid addresses
// (unspecified, multicast) are an error and change nothing; so is a family
// whose socket cannot be opened.
func (p *Prober) SetReflectors(addrs []netip.Addr) error {
	seen := map[netip.Addr]bool{}
	var clean []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
			return fmt.Errorf("probe: %v is not a unicast address to probe", a)
		}
		if !seen[a] {
			seen[a] = true
			clean = append(clean, a)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("probe: prober is closed")
	}
	for _, a := range clean {
		var err error
		if r := p.k.probeFor(a); r.Kind != shape.ProbeICMP {
			_, err = p.senderFor(r)
		} else {
			_, err = p.sockFor(a)
		}
		if err != nil {
			return err
		}
	}
	old := map[netip.Addr]*target{}
	for _, t := range p.targets {
		old[t.addr] = t
	}
	targets := make([]*target, 0, len(clean))
	for _, a := range clean {
		t := old[a]
		if t == nil {
			t = p.retired[a]
			delete(p.retired, a)
		}
		if t == nil {
			t = &target{addr: a, stats: ReflectorStats{Reflector: a}, probe: p.k.probeFor(a)}
			if t.probe.Kind != shape.ProbeICMP {
				t.ts, t.sinceTry = tsFailed, -1 // timestamps are ICMP's
			} else if s, _ := p.sockFor(a); !s.ts || !a.Is4() || p.cfg.NoTimestamps {
				t.ts = tsFailed
				t.sinceTry = -1 // never retry: the socket or family cannot do it
			}
		}
		delete(old, a)
		targets = append(targets, t)
	}
	for a, t := range old {
		p.retired[a] = t
		for k, pd := range p.pending {
			if k.addr == a {
				pd.done = true
				delete(p.pending, k)
				p.remember(k, false, time.Now())
			}
		}
	}
	if len(p.targets) == 0 && len(targets) > 0 {
		p.activeSince = time.Now()
	}
	p.targets = targets
	if p.rr >= len(targets) {
		p.rr = 0
	}
	p.kick()
	return nil
}

// SetPaused stops (true) or resumes (false) sending probes. Probes already
// in flight still end in a sample.
func (p *Prober) SetPaused(paused bool) {
	p.mu.Lock()
	if p.paused && !paused {
		p.activeSince = time.Now()
		p.nextSend = time.Time{}
	}
	p.paused = paused
	p.mu.Unlock()
	p.kick()
}

// Stalled reports whether probing is active and no reflector has answered
// for longer than after (counted from the last reply, or from when probing
// started). A stalled prober has only unreachable or silent reflectors: the
// controller must hold its rates, not read the silence as zero delay.
func (p *Prober) Stalled(now time.Time, after time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused || len(p.targets) == 0 || !p.running {
		return false
	}
	ref := p.activeSince
	if p.lastReply.After(ref) {
		ref = p.lastReply
	}
	return now.Sub(ref) > after
}

// Stats returns a snapshot of the counters.
func (p *Prober) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Foreign: p.foreign, Dropped: p.dropped, ReadErrors: p.readErrs, LastReply: p.lastReply}
	for _, t := range p.targets {
		rs := t.stats
		rs.Method = t.method()
		s.Reflectors = append(s.Reflectors, rs)
	}
	for _, k := range p.socks {
		if k != nil {
			kind := "raw"
			if k.dgrm {
				kind = "datagram"
			}
			kind += via(boundTo(k.pc))
			s.Sockets = append(s.Sockets, fmt.Sprintf("%s (%s)", k.network, kind))
		}
	}
	s.Sockets = append(s.Sockets, p.kindSockets()...)
	return s
}

// Run sends probes and reads replies until ctx is done, then closes the
// sockets and the Samples channel. It returns nil after a cancellation and
// may be called once.
func (p *Prober) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running || p.closed {
		p.mu.Unlock()
		return errors.New("probe: Run called twice")
	}
	p.running = true
	if p.activeSince.IsZero() {
		p.activeSince = time.Now()
	}
	for _, s := range p.socks {
		if s != nil {
			p.startReader(s)
		}
	}
	p.startKinds()
	p.mu.Unlock()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := p.step(time.Now())
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			p.mu.Lock()
			p.closed = true
			p.mu.Unlock()
			p.closeSockets()
			p.closeKinds()
			p.readers.Wait()
			close(p.samples)
			return nil
		case <-timer.C:
		case <-p.wake:
		}
	}
}

func (p *Prober) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// step expires timed-out probes, sends the probe that is due and returns
// how long to sleep until the next thing to do.
func (p *Prober) step(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps++
	p.expire(now)
	wait := time.Hour
	probing := len(p.targets) > 0 && !p.paused
	if probing {
		n, every := p.pace()
		if p.nextSend.IsZero() || now.Sub(p.nextSend) > every {
			// First probe, or we fell behind (a stopped clock after
			// sleep, a slow consumer of the lock): never burst to catch up.
			p.nextSend = now
		}
		if !now.Before(p.nextSend) {
			for range n {
				p.sendNext(now)
			}
			p.nextSend = p.cfg.Grid.Next(p.nextSend, every)
		}
		wait = p.nextSend.Sub(now)
	}
	for p.queue.len() > 0 && p.queue.front().done {
		p.release(p.queue.pop())
	}
	if p.queue.len() > 0 && !probing {
		// While probing, a probe's timeout is noticed at the first send
		// after it (at most one spacing late) instead of waking the
		// prober once more: timers coalesce on the sends.
		wait = min(wait, p.queue.front().deadline.Sub(now))
	}
	// Finished probes are forgotten lazily, at the next step (every send
	// while probing): a wake-up of their own would double the prober's
	// wake-ups, and unmatched treats one past its time as forgotten.
	return max(wait, 0)
}

// recentTTL is how long finished probes are remembered to tell duplicates
// and late replies from foreign ones.
func (p *Prober) recentTTL() time.Duration { return 4 * p.cfg.Timeout }

func (p *Prober) expire(now time.Time) {
	for p.queue.len() > 0 {
		pd := p.queue.front()
		if !pd.done && pd.deadline.After(now) {
			break
		}
		p.queue.pop()
		if pd.done {
			p.release(pd)
			continue
		}
		lost := *pd
		delete(p.pending, pd.key)
		p.release(pd)
		p.remember(lost.key, false, now)
		t := p.target(lost.key.addr)
		if t == nil {
			continue
		}
		if lost.method == MethodTimestamp {
			p.timestampMissed(t)
		}
		if lost.discovery {
			continue
		}
		t.stats.Lost++
		p.deliver(Sample{Reflector: t.addr, Kind: KindLost, Method: lost.method, Seq: lost.key.seq, Sent: lost.sent})
	}
	for p.recentQ.len() > 0 {
		k := p.recentQ.front()
		if f, ok := p.recent[k]; ok && now.Sub(f.at) < p.recentTTL() {
			break
		}
		p.recentQ.pop()
		if f, ok := p.recent[k]; ok && now.Sub(f.at) >= p.recentTTL() {
			delete(p.recent, k)
		}
	}
}

// timestampMissed updates a reflector's capability after an unanswered
// timestamp probe.
func (p *Prober) timestampMissed(t *target) {
	t.tsMisses++
	switch t.ts {
	case tsUnknown:
		if t.tsMisses >= tsDiscoveryTries {
			t.ts, t.sinceTry = tsFailed, 0
		}
	case tsWorks:
		if t.tsMisses >= tsMaxMisses {
			// Maybe the path now filters timestamps: let echo carry the
			// samples while discovery checks again.
			t.ts, t.tsTries, t.tsMisses = tsUnknown, 0, 0
		}
	}
}

func (p *Prober) remember(k pkey, answered bool, now time.Time) {
	if _, ok := p.recent[k]; !ok {
		p.recentQ.push(k)
	}
	p.recent[k] = finished{answered: answered, at: now}
}

func (p *Prober) target(a netip.Addr) *target {
	for _, t := range p.targets {
		if t.addr == a {
			return t
		}
	}
	return nil
}

// minSendGap is the shortest time between two sends: 6 reflectors every
// 300 ms go out two at a time every 100 ms, not one every 50 ms. One every
// 50 ms doubled watch's CPU time and context switches (docs/MEASUREMENTS.md,
// "Probe rounds"); two every 100 ms costs half that and, in the
// simulator, controls as well: the controller's stall timeout (250 ms)
// stays well above the gap and a burst still comes between two load
// samples.
const minSendGap = 100 * time.Millisecond

// pace is Pace for the prober's reflectors.
func (p *Prober) pace() (n int, every time.Duration) {
	return Pace(len(p.targets), p.cfg.Interval)
}

// Pace returns how many probes a prober of reflectors, each probed every
// interval, sends at once and the time between two sends: as few at a
// time as keep the sends minSendGap apart (the simulator's twin of watch
// sends as it does).
func Pace(reflectors int, interval time.Duration) (n int, every time.Duration) {
	if reflectors < 1 || interval <= 0 {
		return 1, max(interval, time.Millisecond)
	}
	k := time.Duration(reflectors)
	n = min(reflectors, max(1, int((k*minSendGap+interval-1)/interval)))
	return n, max(interval*time.Duration(n)/k, time.Millisecond)
}

// sendNext sends the next reflector's probe (and, while its timestamp
// capability is being discovered, a timestamp discovery probe too). This
// is where the scheduler drives the senders; a reflector's probe goes out
// on the socket of its family.
func (p *Prober) sendNext(now time.Time) {
	t := p.targets[p.rr]
	p.rr = (p.rr + 1) % len(p.targets)
	if t.probe.Kind != shape.ProbeICMP {
		p.sendKind(t, now)
		return
	}
	s, err := p.sockFor(t.addr)
	if err != nil {
		t.stats.Sent++
		t.stats.Unreachable++
		p.deliver(Sample{Reflector: t.addr, Kind: KindUnreachable, Method: MethodEcho, Sent: now, Err: err.Error()})
		return
	}
	if t.ts == tsFailed && t.sinceTry >= 0 {
		t.sinceTry++
		if t.sinceTry >= tsRetryEvery {
			t.ts, t.tsTries, t.tsMisses, t.sinceTry = tsUnknown, 0, 0, 0
		}
	}
	if t.ts == tsUnknown && t.tsTries < tsDiscoveryTries {
		t.tsTries++
		p.send(s, t, MethodTimestamp, true, now)
	}
	p.send(s, t, t.method(), false, now)
}

// release returns a finished probe's record (out of pending and of the
// queue) for reuse, so that probing does not allocate per probe.
func (p *Prober) release(pd *pending) {
	if len(p.free) < 64 {
		*pd = pending{}
		p.free = append(p.free, pd)
	}
}

func (p *Prober) send(s *sock, t *target, m Method, discovery bool, now time.Time) {
	p.seq++
	p.ext++
	k := pkey{addr: t.addr, seq: p.seq}
	if old := p.pending[k]; old != nil {
		// 65536 probes later the same reflector has the same sequence
		// number and the old probe is still pending: only possible with
		// an absurd timeout. Let the new probe win; the queue still
		// holds the old record and releases it when it comes out, so it
		// must not stay reachable from pending too.
		old.done = true
		delete(p.pending, k)
	}
	var pd *pending
	if n := len(p.free); n > 0 {
		pd, p.free = p.free[n-1], p.free[:n-1]
	} else {
		pd = new(pending)
	}
	*pd = pending{key: k, method: m, discovery: discovery, ext: p.ext, sent: now, deadline: now.Add(p.cfg.Timeout)}
	var b []byte
	if m == MethodTimestamp {
		pd.orig = uint32(wire.MsSinceMidnight(now))
		b = wire.PutTimestamp(p.tx[:], p.id, p.seq, pd.orig)
	} else {
		wire.PutPayload(p.tx[8:], p.nonce, p.ext)
		b = wire.PutEcho(p.tx[:], s.v6, p.id, p.seq, p.tx[8:8+wire.PayloadLen])
	}
	if !discovery {
		t.stats.Sent++
	}
	if t.dst == nil {
		if s.dgrm {
			t.dst = &net.UDPAddr{IP: t.addr.AsSlice(), Zone: t.addr.Zone()}
		} else {
			t.dst = &net.IPAddr{IP: t.addr.AsSlice(), Zone: t.addr.Zone()}
		}
	}
	if _, err := s.pc.WriteTo(b, t.dst); err != nil {
		if discovery {
			p.timestampMissed(t)
			p.release(pd)
			return
		}
		t.stats.Unreachable++
		p.deliver(Sample{Reflector: t.addr, Kind: KindUnreachable, Method: m, Seq: p.seq, Sent: now, Err: err.Error()})
		p.release(pd)
		return
	}
	p.pending[k] = pd
	p.queue.push(pd)
}

// deliver hands s to the consumer without ever blocking: when the channel
// is full the oldest sample makes room and is counted as dropped. Called
// with p.mu held (so there is one producer at a time). Once Run has
// begun to stop, samples are dropped: a lost-probe timer of a TCP or UDP
// sender can still be reporting while Run closes the channel, and a send
// on it would then panic.
func (p *Prober) deliver(s Sample) {
	if p.closed {
		return
	}
	for {
		select {
		case p.samples <- s:
			return
		default:
		}
		select {
		case <-p.samples:
			p.dropped++
		default:
		}
	}
}

// sockFor returns the socket for a's family, opening it on first use.
// Called with p.mu held.
func (p *Prober) sockFor(a netip.Addr) (*sock, error) {
	i := 0
	if !a.Is4() {
		i = 1
	}
	if p.socks[i] != nil {
		return p.socks[i], nil
	}
	if p.sockErr[i] != nil {
		return nil, p.sockErr[i]
	}
	s, err := p.open(i == 1)
	if err != nil {
		p.sockErr[i] = err
		return nil, err
	}
	p.socks[i] = s
	if p.running {
		p.startReader(s)
	}
	return s, nil
}

// open opens the ICMP socket for one family according to cfg.Socket.
func (p *Prober) open(v6 bool) (*sock, error) {
	dgramNet, rawNet, any := "udp4", "ip4:icmp", "0.0.0.0"
	if v6 {
		dgramNet, rawNet, any = "udp6", "ip6:ipv6-icmp", "::"
	}
	tryDgram := func() (*sock, error) {
		if !datagramSupported {
			return nil, errors.New(datagramHint)
		}
		pc, err := p.cfg.Listen(dgramNet, any)
		if err != nil {
			return nil, fmt.Errorf("opening %s ICMP socket: %w (%s)", dgramNet, err, datagramHint)
		}
		s := &sock{pc: pc, network: dgramNet, v6: v6, dgrm: true, wireID: p.id, matchID: true, ts: datagramTimestamps && !v6}
		if datagramRewritesID {
			s.matchID = false
			if ua, ok := pc.LocalAddr().(*net.UDPAddr); ok && ua.Port != 0 {
				s.wireID, s.matchID = uint16(ua.Port), true
			}
		}
		return s, nil
	}
	tryRaw := func() (*sock, error) {
		pc, err := p.cfg.Listen(rawNet, any)
		if err != nil {
			return nil, fmt.Errorf("opening raw %s socket: %w (needs root or CAP_NET_RAW)", rawNet, err)
		}
		filterReplies(pc, v6)
		return &sock{pc: pc, network: rawNet, v6: v6, wireID: p.id, matchID: true, ts: !v6}, nil
	}
	switch p.cfg.Socket {
	case SocketDatagram:
		return tryDgram()
	case SocketRaw:
		return tryRaw()
	}
	if preferRawTimestamps && !v6 && !p.cfg.NoTimestamps {
		if s, err := tryRaw(); err == nil {
			return s, nil
		}
	}
	s, derr := tryDgram()
	if derr == nil {
		return s, nil
	}
	s, rerr := tryRaw()
	if rerr == nil {
		return s, nil
	}
	return nil, fmt.Errorf("probe: no ICMP socket: %v; %v", derr, rerr)
}

// filterReplies asks the kernel to hand a raw ICMP socket only the
// messages a prober reads (echo and timestamp replies, unreachable, time
// exceeded): a raw socket otherwise receives every ICMP message on the
// host, each one a wake-up for nothing (on loopback, even the prober's
// own requests). Where the system has no such filter (ICMP_FILTER is
// Linux's; ICMP6_FILTER exists on both) matching still sorts them out.
func filterReplies(pc net.PacketConn, v6 bool) {
	c, ok := pc.(interface {
		IPv4PacketConn() *ipv4.PacketConn
		IPv6PacketConn() *ipv6.PacketConn
	})
	if !ok {
		return
	}
	if v6 {
		if p6 := c.IPv6PacketConn(); p6 != nil {
			var f ipv6.ICMPFilter
			f.SetAll(true)
			f.Accept(ipv6.ICMPTypeEchoReply)
			f.Accept(ipv6.ICMPTypeDestinationUnreachable)
			f.Accept(ipv6.ICMPTypeTimeExceeded)
			p6.SetICMPFilter(&f)
		}
		return
	}
	if p4 := c.IPv4PacketConn(); p4 != nil {
		var f ipv4.ICMPFilter
		f.SetAll(true)
		f.Accept(ipv4.ICMPTypeEchoReply)
		f.Accept(ipv4.ICMPTypeTimestampReply)
		f.Accept(ipv4.ICMPTypeDestinationUnreachable)
		f.Accept(ipv4.ICMPTypeTimeExceeded)
		p4.SetICMPFilter(&f)
	}
}

func (p *Prober) closeSockets() {
	p.mu.Lock()
	socks := p.socks
	p.mu.Unlock()
	for _, s := range socks {
		if s != nil {
			s.pc.Close()
		}
	}
}

func (p *Prober) startReader(s *sock) {
	p.readers.Add(1)
	go func() {
		defer p.readers.Done()
		p.readLoop(s)
	}()
}

// readLoop reads one ICMP socket's replies until it is closed (readEach)
// and matches each; failed reads are counted, and end the loop once the
// prober is closed.
func (p *Prober) readLoop(s *sock) {
	readEach(s.pc, func(b []byte, from net.Addr, now time.Time) {
		p.handle(s, addrOf(from), wire.ParseReply(s.v6, b), now)
	}, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.readErrs++
		return p.closed
	})
}

func addrOf(a net.Addr) netip.Addr {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.IPAddr:
		ip = a.IP
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap()
}

// handle matches one parsed message to its probe.
func (p *Prober) handle(s *sock, src netip.Addr, r wire.Reply, now time.Time) {
	if r.Kind == wire.ReplyNone {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Timeouts are checked on the sends; a reply that comes after its
	// probe's timeout but before the next send is late all the same.
	p.expire(now)
	if s.matchID && r.ID != s.wireID {
		p.foreign++
		return
	}
	var k pkey
	switch r.Kind {
	case wire.ReplyEcho:
		nonce, _, ok := wire.DecodePayload(r.Payload)
		if !ok || nonce != p.nonce {
			p.foreign++
			return
		}
		k = pkey{addr: p.canonical(src), seq: r.Seq}
	case wire.ReplyTimestamp:
		k = pkey{addr: p.canonical(src), seq: r.Seq}
	case wire.ReplyUnreachable:
		k = pkey{addr: p.canonical(r.QuotedDst), seq: r.Seq}
	}
	pd := p.pending[k]
	if pd == nil {
		p.unmatched(k, r, now)
		return
	}
	switch {
	case r.Kind == wire.ReplyEcho && (pd.method != MethodEcho || !p.extMatches(pd, r.Payload)),
		r.Kind == wire.ReplyTimestamp && (pd.method != MethodTimestamp || r.Orig != pd.orig),
		r.Kind == wire.ReplyUnreachable && r.QuotedEcho != (pd.method == MethodEcho):
		p.foreign++
		return
	}
	pd.done = true
	delete(p.pending, k)
	p.remember(k, true, now)
	t := p.target(k.addr)
	if t == nil {
		return
	}
	if r.Kind == wire.ReplyUnreachable {
		if pd.method == MethodTimestamp {
			p.timestampMissed(t)
		}
		if pd.discovery {
			return
		}
		t.stats.Unreachable++
		p.deliver(Sample{Reflector: t.addr, Kind: KindUnreachable, Method: pd.method, Seq: k.seq, Sent: pd.sent, Err: "ICMP error from " + src.String()})
		return
	}
	smp := Sample{Reflector: t.addr, Kind: KindReply, Method: pd.method, Seq: k.seq, Sent: pd.sent, Received: now, RTT: now.Sub(pd.sent)}
	if r.Kind == wire.ReplyTimestamp {
		up, down, ok := wire.OneWayDelays(pd.sent, now, r.Recv, r.Xmit)
		if !ok {
			// A non-standard clock: the reflector answers, but its
			// stamps say nothing about one-way delay.
			t.ts, t.sinceTry = tsFailed, -1
		} else {
			t.ts, t.tsMisses = tsWorks, 0
			smp.OWD, smp.UpOWD, smp.DownOWD = true, up, down
		}
	}
	if pd.discovery {
		return
	}
	t.stats.Received++
	t.stats.LastReply = now
	p.lastReply = now
	p.deliver(smp)
}

// extMatches checks the echo payload's 32-bit sequence number, so a reply
// to an older probe that reused the 16-bit sequence is not mistaken for the
// current one.
func (p *Prober) extMatches(pd *pending, payload []byte) bool {
	_, ext, ok := wire.DecodePayload(payload)
	return ok && ext == pd.ext
}

// unmatched classifies a reply with no pending probe: a duplicate, a late
// reply, or someone else's.
func (p *Prober) unmatched(k pkey, r wire.Reply, now time.Time) {
	f, ok := p.recent[k]
	if ok && now.Sub(f.at) >= p.recentTTL() {
		ok = false // forgotten, just not cleaned up yet
	}
	if !ok {
		if r.Kind != wire.ReplyUnreachable {
			p.foreign++
		}
		return
	}
	t := p.target(k.addr)
	if t == nil || r.Kind == wire.ReplyUnreachable {
		return // a reflector removed meanwhile, or a second ICMP error
	}
	if f.answered {
		t.stats.Duplicates++
	} else {
		t.stats.Late++
	}
}

// canonical maps a reply's source to the configured reflector address, so
// that a link-local reflector given with a zone still matches.
func (p *Prober) canonical(a netip.Addr) netip.Addr {
	for _, t := range p.targets {
		if t.addr.WithZone("") == a.WithZone("") {
			return t.addr
		}
	}
	return a
}

// Reflectors returns the current reflector list.
func (p *Prober) Reflectors() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]netip.Addr, 0, len(p.targets))
	for _, t := range p.targets {
		out = append(out, t.addr)
	}
	return slices.Clip(out)
}

// fifo is a queue that keeps its storage: taking from the front does not
// lose capacity, so a steady flow of probes does not allocate.
type fifo[T any] struct {
	buf  []T
	head int
}

func (q *fifo[T]) len() int { return len(q.buf) - q.head }

func (q *fifo[T]) front() T { return q.buf[q.head] }

// pop removes and returns the front element.
func (q *fifo[T]) pop() T {
	var zero T
	v := q.buf[q.head]
	q.buf[q.head] = zero
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	return v
}

// push appends v, first moving the elements down to the start when the
// storage is full but has room in front.
func (q *fifo[T]) push(v T) {
	if q.head > 0 && len(q.buf) == cap(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, v)
}
