// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/score"
	"github.com/macake/macake/shape"
)

// The testbed's addresses: the client sits behind the ISP's router, the
// servers beyond it.
const (
	clientAddr = "10.77.1.2"
	ispLAN     = "10.77.1.1"
	ispUp      = "10.77.2.1"
	serverAddr = "10.77.2.2" // bulk TCP
	probeAddr  = "10.77.2.20"
	bulkPort   = 5001
	probePort  = 7007
	callPort   = 7008
)

// Testbed is client ↔ ISP ↔ server in three network namespaces joined by
// veth pairs. The ISP namespace is the bloated bottleneck: an htb class at
// the trace's capacity with a drop-tail bfifo holding one second of the
// trace's peak, in each direction. The server namespace answers ICMP at
// the reflector addresses, echoes the ping (the independent probe), holds
// the far end of the call and serves bulk TCP both ways (CUBIC); the
// client namespace is where macake runs.
type Testbed struct {
	// Lab owns the namespaces.
	Lab *netns.Lab
	// Client runs macake on ClientDev; ISP holds the bottleneck; Server
	// the reflectors, the probe's echo and the bulk TCP server.
	Client, ISP, Server *netns.Namespace
	// Download and Upload are the ISP's bottlenecks (egress towards the
	// client, and towards the server).
	Download, Upload *netns.Bottleneck
	// BufferDown and BufferUp are their bfifo limits in bytes: one second
	// of the trace's peak capacity.
	BufferDown, BufferUp int64

	downBytes, upBytes atomic.Int64
	rateDown, rateUp   atomic.Int64 // what the bottlenecks run at now
	congestion         sync.Map     // congestion controls seen on load sockets
	closers            []io.Closer
	probe              *Probe
	call               *Call
}

// NewTestbed builds the namespaces for a trace (its first step sets the
// bottleneck; its peak sizes the buffers) and starts the servers and the
// probe. Everything goes away in tb's Cleanup. It skips the test when not
// root.
func NewTestbed(tb testing.TB, prefix string, trace Trace) *Testbed {
	tb.Helper()
	lab := netns.New(tb, prefix)
	lab.Require("tc", "iproute2")
	t := &Testbed{Lab: lab}
	t.Client, t.ISP, t.Server = lab.Namespace("cli"), lab.Namespace("isp"), lab.Namespace("srv")
	lab.Link(t.Client, ClientDev, t.ISP, "lan0")
	lab.Link(t.ISP, "up0", t.Server, "isp0")
	t.Client.AddAddr(ClientDev, clientAddr+"/24")
	t.ISP.AddAddr("lan0", ispLAN+"/24")
	t.ISP.AddAddr("up0", ispUp+"/24")
	t.Server.AddAddr("isp0", serverAddr+"/24")
	t.Server.AddAddr("isp0", probeAddr+"/24")
	for _, r := range Reflectors {
		t.Server.AddAddr("isp0", r+"/24")
	}
	t.ISP.Forward()
	t.Client.Route("default", "via", ispLAN)
	t.Server.Route("default", "via", ispUp)

	first := trace.At(0)
	t.rateDown.Store(first.Download)
	t.rateUp.Store(first.Upload)
	t.BufferDown, t.BufferUp = trace.Max(true)/8, trace.Max(false)/8
	t.Download = t.ISP.Bottleneck("lan0", first.Download, t.BufferDown)
	t.Upload = t.ISP.Bottleneck("up0", first.Upload, t.BufferUp)

	t.startBulkServer(tb)
	t.startEchoServer(tb)
	p, err := StartProbe(t.Client, netip.MustParseAddrPort(fmt.Sprintf("%s:%d", probeAddr, probePort)), PingInterval)
	if err != nil {
		tb.Fatalf("starting the probe: %v", err)
	}
	t.probe = p
	c, err := StartCall(t.Client, t.Server, netip.MustParseAddrPort(fmt.Sprintf("%s:%d", probeAddr, callPort)), CallInterval)
	if err != nil {
		p.Close()
		tb.Fatalf("starting the call: %v", err)
	}
	t.call = c
	tb.Cleanup(func() {
		p.Close()
		c.Close()
		for _, c := range t.closers {
			c.Close()
		}
	})
	return t
}

// SetCapacity sets both bottleneck rates.
func (t *Testbed) SetCapacity(ctx context.Context, s Step) error {
	return errors.Join(t.setDown(ctx, s.Download), t.setUp(ctx, s.Upload))
}

func (t *Testbed) setDown(ctx context.Context, rate int64) error {
	t.rateDown.Store(rate)
	return t.Download.SetRate(ctx, rate)
}

func (t *Testbed) setUp(ctx context.Context, rate int64) error {
	t.rateUp.Store(rate)
	return t.Upload.SetRate(ctx, rate)
}

// Replay plays trace on the bottleneck from now until it ends or ctx
// does: one tc call per direction whose rate changes.
func (t *Testbed) Replay(ctx context.Context, trace Trace) error {
	start := time.Now()
	var last Step
	for i, s := range trace.Steps {
		if d := time.Until(start.Add(s.At)); d > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(d):
			}
		}
		if i == 0 || s.Download != last.Download {
			if err := t.setDown(ctx, s.Download); err != nil && ctx.Err() == nil {
				return err
			}
		}
		if i == 0 || s.Upload != last.Upload {
			if err := t.setUp(ctx, s.Upload); err != nil && ctx.Err() == nil {
				return err
			}
		}
		last = s
	}
	return nil
}

// bulk protocol: the client sends one byte, 'D' for the server to send
// until the connection closes, 'U' for the server to read until it does.
const (
	bulkDownload = 'D'
	bulkUpload   = 'U'
)

func (t *Testbed) startBulkServer(tb testing.TB) {
	tb.Helper()
	l, err := t.Server.Listen(netns.CubicListenConfig(), "tcp4", fmt.Sprintf("%s:%d", serverAddr, bulkPort))
	if err != nil {
		tb.Fatalf("bulk server: %v", err)
	}
	t.closers = append(t.closers, l)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go t.serveBulk(c)
		}
	}()
}

func (t *Testbed) serveBulk(c net.Conn) {
	defer c.Close()
	if sc, ok := c.(*net.TCPConn); ok {
		t.congestion.Store("server "+speedtest.Congestion(sc), true)
	}
	var cmd [1]byte
	if _, err := io.ReadFull(c, cmd[:]); err != nil {
		return
	}
	buf := make([]byte, 64<<10)
	switch cmd[0] {
	case bulkDownload:
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	case bulkUpload:
		for {
			n, err := c.Read(buf)
			t.upBytes.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
}

func (t *Testbed) startEchoServer(tb testing.TB) {
	tb.Helper()
	pc, err := t.Server.ListenPacket("udp4", fmt.Sprintf("%s:%d", probeAddr, probePort))
	if err != nil {
		tb.Fatalf("echo server: %v", err)
	}
	t.closers = append(t.closers, pc)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], addr)
		}
	}()
}

// Load is a running set of bulk TCP flows from the client.
type Load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	errs   []error
}

// StartLoad opens down download and up upload CUBIC flows to the server.
func (t *Testbed) StartLoad(ctx context.Context, down, up int) (*Load, error) {
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{cancel: cancel}
	open := func(cmd byte) (net.Conn, error) {
		c, err := t.Client.Dial(ctx, netns.CubicDialer(), "tcp4", fmt.Sprintf("%s:%d", serverAddr, bulkPort))
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			t.congestion.Store("client "+speedtest.Congestion(tc), true)
		}
		if _, err := c.Write([]byte{cmd}); err != nil {
			c.Close()
			return nil, err
		}
		l.conns = append(l.conns, c)
		return c, nil
	}
	for i := 0; i < down+up; i++ {
		cmd := byte(bulkDownload)
		if i >= down {
			cmd = bulkUpload
		}
		c, err := open(cmd)
		if err != nil {
			l.Stop()
			return nil, fmt.Errorf("opening load flow %d: %w", i+1, err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if err := pump(ctx, c, cmd, &t.downBytes); err != nil {
				l.mu.Lock()
				l.errs = append(l.errs, err)
				l.mu.Unlock()
			}
		}()
	}
	return l, nil
}

// Stop closes every flow and waits for them; it returns the errors flows
// met before Stop (a reset flow means the load was not saturating).
func (l *Load) Stop() error {
	l.cancel()
	for _, c := range l.conns {
		// Reset, not close: a closed upload socket would go on sending
		// the megabytes in its buffer into the next phase's idle window.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

// Bytes returns the payload bytes received by download flows and by the
// server from upload flows, so far.
func (t *Testbed) Bytes() (down, up int64) { return t.downBytes.Load(), t.upBytes.Load() }

// Congestion lists the congestion controls seen on load sockets, e.g.
// ["client cubic", "server cubic"]: anything but cubic would hide the
// bloat (DESIGN §6).
func (t *Testbed) Congestion() []string {
	var out []string
	t.congestion.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
	return out
}

// Probe measures round-trip times with UDP echo at a fixed interval: the
// ping. Each probe is as large as ping's ICMP echo (PingPayload: 84 bytes
// of IP) and carries its sequence number; the send time stays in the
// process, so the clock is one monotonic clock. The size matters: a bfifo
// nearly full of 1514-byte frames still takes a 58-byte frame where a
// 98-byte one is dropped.
type Probe struct {
	conn     net.PacketConn
	target   net.Addr
	interval time.Duration
	mu       sync.Mutex
	sent     []time.Time     // by sequence number
	rtt      []time.Duration // by sequence number; 0 = no reply (yet)
	done     chan struct{}
	wg       sync.WaitGroup
}

// StartProbe starts probing target from inside ns every interval.
func StartProbe(ns *netns.Namespace, target netip.AddrPort, interval time.Duration) (*Probe, error) {
	pc, err := ns.ListenPacket("udp4", ":0")
	if err != nil {
		return nil, err
	}
	p := &Probe{conn: pc, target: net.UDPAddrFromAddrPort(target), interval: interval, done: make(chan struct{})}
	p.wg.Add(2)
	go p.send()
	go p.receive()
	return p, nil
}

// pump runs one bulk flow on c until ctx ends: it reads what the server
// sends (dir bulkDownload), counting it in received, or writes to the
// server, which counts what arrives (the socket buffer accepts more than
// the link has carried). It returns the flow's error; nil once ctx ended.
func pump(ctx context.Context, c net.Conn, dir byte, received *atomic.Int64) error {
	buf := make([]byte, 64<<10)
	for ctx.Err() == nil {
		var err error
		if dir == bulkDownload {
			var n int
			n, err = c.Read(buf)
			received.Add(int64(n))
		} else {
			_, err = c.Write(buf)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

func (p *Probe) send() {
	defer p.wg.Done()
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	var msg [PingPayload]byte
	for {
		p.mu.Lock()
		seq := uint64(len(p.sent))
		p.sent = append(p.sent, time.Now())
		p.rtt = append(p.rtt, 0)
		p.mu.Unlock()
		binary.BigEndian.PutUint64(msg[:8], seq)
		binary.BigEndian.PutUint64(msg[8:], 0x6d6163616b65) // "macake"
		p.conn.WriteTo(msg[:], p.target)
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
	}
}

func (p *Probe) receive() {
	defer p.wg.Done()
	buf := make([]byte, 2*PingPayload)
	for {
		n, _, err := p.conn.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			return
		}
		if n != PingPayload || binary.BigEndian.Uint64(buf[8:16]) != 0x6d6163616b65 {
			continue
		}
		seq := binary.BigEndian.Uint64(buf[:8])
		p.mu.Lock()
		if seq < uint64(len(p.sent)) && p.rtt[seq] == 0 {
			p.rtt[seq] = max(now.Sub(p.sent[seq]), time.Nanosecond)
		}
		p.mu.Unlock()
	}
}

// Window returns the round-trip times of the probes sent in [from, to)
// and how many of them got no reply. Call it once replies can no longer
// arrive (after the queues drained).
func (p *Probe) Window(from, to time.Time) (rtts []time.Duration, lost int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return arrivedIn(p.sent, p.rtt, from, to)
}

// Series returns, for the probes sent in [from, to), their send time
// since from and their round-trip time (0: no reply), for plots.
func (p *Probe) Series(from, to time.Time) (at, rtt []time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, s := range p.sent {
		if s.Before(from) || !s.Before(to) {
			continue
		}
		at = append(at, s.Sub(from))
		rtt = append(rtt, p.rtt[i])
	}
	return at, rtt
}

// Latest returns the round-trip time of the newest probe that has been
// answered, and when it was sent.
func (p *Probe) Latest() (time.Duration, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.sent) - 1; i >= 0; i-- {
		if p.rtt[i] != 0 {
			return p.rtt[i], p.sent[i]
		}
	}
	return 0, time.Time{}
}

// Close stops probing.
func (p *Probe) Close() error {
	close(p.done)
	err := p.conn.Close()
	p.wg.Wait()
	return err
}

// Shaper is what a phase runs on the client: macake apply, or macake
// watch. A nil Shaper is an unshaped phase.
type Shaper interface {
	// Start installs the shaping and returns once it is in place.
	Start(ctx context.Context) error
	// Stop removes it and returns the cost of the process it ran, if any,
	// since Start.
	Stop(ctx context.Context) (*ProcessCost, error)
}

// Follower is a Shaper that follows the trace itself (the oracle): the
// phase calls Follow when the trace starts replaying, and cancels ctx when
// the load stops.
type Follower interface {
	Follow(ctx context.Context, start time.Time) error
}

// PhaseConfig is the shape of one phase.
type PhaseConfig struct {
	// Idle is the probe-only window before the load starts (also the
	// shaper's warm-up: the controller learns its baseline there).
	Idle time.Duration
	// DownFlows and UpFlows are the bulk TCP flows of the load.
	DownFlows, UpFlows int
	// LostDelay is what a lost ping or call packet counts as (0:
	// score.DefaultLostDelay).
	LostDelay time.Duration
}

// RunPhase runs one phase: the shaper (if any) starts, the probe measures
// the idle window, then the load runs while the trace replays on the
// bottleneck, then the load stops, the queues drain and the shaper stops.
// The trace starts again from its beginning in every phase.
func (t *Testbed) RunPhase(ctx context.Context, name string, shaper Shaper, trace Trace, cfg PhaseConfig) (Phase, error) {
	ph := Phase{Name: name, Shaped: shaper != nil}
	if err := t.SetCapacity(ctx, trace.At(0)); err != nil {
		return ph, err
	}
	if shaper != nil {
		if err := shaper.Start(ctx); err != nil {
			return ph, fmt.Errorf("%s: starting the shaper: %w", name, err)
		}
	}
	stopShaper := func() error {
		if shaper == nil {
			return nil
		}
		cost, err := shaper.Stop(ctx)
		ph.Process = cost
		shaper = nil
		return err
	}
	defer stopShaper()

	idleFrom := time.Now()
	if err := sleep(ctx, cfg.Idle); err != nil {
		return ph, err
	}
	idleTo := time.Now()

	replayCtx, stopReplay := context.WithCancel(ctx)
	replayed := make(chan error, 1)
	followed := make(chan error, 1)
	replayStart := time.Now()
	go func() { replayed <- t.Replay(replayCtx, trace) }()
	if f, ok := shaper.(Follower); ok {
		go func() { followed <- f.Follow(replayCtx, replayStart) }()
	} else {
		followed <- nil
	}
	down0, up0 := t.Bytes()
	load, err := t.StartLoad(ctx, cfg.DownFlows, cfg.UpFlows)
	if err != nil {
		stopReplay()
		return ph, err
	}
	loadFrom := time.Now()
	sleep(ctx, trace.Length)
	loadTo := time.Now()
	down1, up1 := t.Bytes()
	loadErr := load.Stop()
	stopReplay()
	if err := <-replayed; err != nil {
		return ph, fmt.Errorf("%s: replaying the trace: %w", name, err)
	}
	if err := <-followed; err != nil {
		return ph, fmt.Errorf("%s: %w", name, err)
	}
	if loadErr != nil {
		return ph, fmt.Errorf("%s: a load flow failed: %w", name, loadErr)
	}
	secs := loadTo.Sub(loadFrom).Seconds()
	ph.Goodput = float64(down1-down0) * 8 / secs
	ph.UploadGoodput = float64(up1-up0) * 8 / secs

	ph.IdleFrom, ph.IdleTo, ph.LoadFrom, ph.LoadTo = idleFrom, idleTo, loadFrom, loadTo
	idle, lost := t.probe.Window(idleFrom, idleTo)
	ph.Idle = Summarize(idle, lost, score.LostOrDefault(cfg.LostDelay))
	if err := t.drain(ctx, ph.Idle.P90+2*time.Millisecond, time.Now()); err != nil {
		return ph, fmt.Errorf("%s: %w", name, err)
	}
	loaded, lost := t.probe.Window(loadFrom, loadTo)
	ph.Loaded = Summarize(loaded, lost, LostRTT(ph.Idle, cfg.LostDelay))
	ph.SeriesAt, ph.SeriesRTT = t.probe.Series(loadFrom, loadTo)
	for _, d := range shape.Directions {
		ph.Call[d] = t.call.Flow(d, idleFrom, idleTo, loadFrom, loadTo, cfg.LostDelay)
	}
	if err := stopShaper(); err != nil {
		return ph, fmt.Errorf("%s: stopping the shaper: %w", name, err)
	}
	if err := t.SetCapacity(ctx, trace.At(0)); err != nil {
		return ph, err
	}
	return ph, ctx.Err()
}

// drain waits until three probes in a row, sent after since, come back
// within limit: the queues are empty again, so the next phase starts from
// an idle link. It waits at least as long as the fullest queue can take
// to empty at the current rate, plus two seconds, and beyond that for as
// long as the probes' round trip keeps falling (a queue still emptying:
// in a cakevm guest, or after a replay that ended at a trough, the flows
// take longer to stop than the rate says), up to drainCap; then it gives
// up with an error.
func (t *Testbed) drain(ctx context.Context, limit time.Duration, since time.Time) error {
	drainTime := func(buffer, rate int64) time.Duration {
		return time.Duration(float64(buffer*8) / float64(max(rate, 1)) * float64(time.Second))
	}
	worst := max(drainTime(t.BufferDown, t.rateDown.Load()), drainTime(t.BufferUp, t.rateUp.Load())) + 2*time.Second
	start := time.Now()
	deadline := start.Add(worst)
	good := 0
	var seen time.Time
	lowest := time.Duration(math.MaxInt64)
	for now := time.Now(); now.Before(deadline); now = time.Now() {
		if rtt, at := t.probe.Latest(); at.After(since) && at.After(seen) {
			seen = at
			if rtt < lowest {
				lowest = rtt
				// Still emptying: wait a while longer, within the cap.
				if later := now.Add(drainProgress); later.After(deadline) {
					deadline = later
				}
				if capAt := start.Add(max(worst, drainCap)); deadline.After(capAt) {
					deadline = capAt
				}
			}
			if rtt <= limit {
				good++
			} else {
				good = 0
			}
			if good >= 3 {
				return nil
			}
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	rtt, _ := t.probe.Latest()
	return fmt.Errorf("the queues did not drain within %v after the load stopped (probe RTT %v, idle p90 + 2 ms is %v)", time.Since(start).Round(time.Millisecond), rtt, limit)
}

const (
	// drainProgress is how long drain waits past its deadline after a
	// probe came back faster than every one before it.
	drainProgress = 3 * time.Second
	// drainCap is the longest drain waits for a queue still emptying,
	// unless the fullest queue's drain time at the current rate is longer.
	drainCap = time.Minute
)

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
