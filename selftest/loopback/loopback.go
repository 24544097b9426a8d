// SPDX-License-Identifier: Apache-2.0

// Package loopback measures a shaper on the loopback interface: a TCP
// stream to a local listener through a pipe of known rate and queue, with
// small pings on a second connection through the same pipe, gives the
// rate the shaper lets through and the queueing delay it adds. Judge holds
// the two against what the pipe was given: the rate, and Q/R, the delay of
// a full drop-tail queue of Q bytes at R bit/s, which is what macake's
// simulator and its auto queue sizing assume a dummynet pipe adds.
//
// The measurement is plain sockets; which packets cross the shaper is the
// caller's rule (pf: one port of the listener on lo0). Judge is pure
// arithmetic, tested on recorded numbers.
package loopback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// The first byte a client sends says what the connection is for.
const (
	kindBulk = 'B' // a stream the server reads and counts
	kindEcho = 'E' // pings: every byte is echoed back
)

// Server is the far end of a measurement: it counts the bulk bytes it
// receives, with when, and echoes pings.
type Server struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	recv []point // cumulative bulk bytes over time
	tot  int64
	open map[net.Conn]bool
}

type point struct {
	at    time.Time
	total int64
}

// Serve starts a server on ln; Close stops it.
func Serve(ln net.Listener) *Server {
	s := &Server{ln: ln, open: map[net.Conn]bool{}}
	s.wg.Go(s.accept)
	return s
}

// Addr is where the server listens.
func (s *Server) Addr() netip.AddrPort {
	ap, _ := netip.ParseAddrPort(s.ln.Addr().String())
	return ap
}

// Close stops the server and its connections.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.open[c] = true
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.open, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.serve(c)
		})
	}
}

func (s *Server) serve(c net.Conn) {
	kind := make([]byte, 1)
	if _, err := io.ReadFull(c, kind); err != nil {
		return
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			switch kind[0] {
			case kindBulk:
				s.mu.Lock()
				s.tot += int64(n)
				s.recv = append(s.recv, point{time.Now(), s.tot})
				s.mu.Unlock()
			case kindEcho:
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Received returns the bulk bytes received so far.
func (s *Server) Received() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tot
}

// bytesBetween returns the bulk bytes received in [from, to].
func (s *Server) bytesBetween(from, to time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := func(t time.Time) int64 {
		i, _ := slices.BinarySearchFunc(s.recv, t, func(p point, t time.Time) int { return p.at.Compare(t) })
		if i == 0 {
			return 0
		}
		return s.recv[i-1].total
	}
	return before(to) - before(from)
}

// Dial opens a connection to the server, through the shaper.
type Dial func(ctx context.Context) (net.Conn, error)

// Config tunes a measurement; zero fields take the defaults.
type Config struct {
	// Duration is how long the bulk stream runs (default 4 s).
	Duration time.Duration
	// Warmup is left out of the rate and delay while TCP fills the queue
	// (default 1 s).
	Warmup time.Duration
	// PingInterval spaces the pings under load (default 50 ms).
	PingInterval time.Duration
	// IdlePings are taken before the load, for the base RTT (default 10).
	IdlePings int
}

func (c Config) withDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = 4 * time.Second
	}
	if c.Warmup <= 0 || c.Warmup >= c.Duration {
		c.Warmup = c.Duration / 4
	}
	if c.PingInterval <= 0 {
		c.PingInterval = 50 * time.Millisecond
	}
	if c.IdlePings <= 0 {
		c.IdlePings = 10
	}
	return c
}

// Measurement is what one run measured.
type Measurement struct {
	// IdleRTT are the pings before the load; LoadedRTT those during its
	// steady part.
	IdleRTT   []time.Duration `json:"idle_rtt_ns"`
	LoadedRTT []time.Duration `json:"loaded_rtt_ns"`
	// Bytes is what the server received in the steady part, which lasted
	// Window.
	Bytes  int64         `json:"bytes"`
	Window time.Duration `json:"window_ns"`
}

// Send writes n bytes on a bulk connection and closes it: a few packets
// through the shaper, for a listing that shows a flow.
func Send(ctx context.Context, dial Dial, n int) error {
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	_, err = c.Write(append([]byte{kindBulk}, make([]byte, n)...))
	return err
}

// Measure runs one measurement against srv: idle pings, then a bulk
// stream for cfg.Duration with pings every cfg.PingInterval.
func Measure(ctx context.Context, srv *Server, dial Dial, cfg Config) (Measurement, error) {
	cfg = cfg.withDefaults()
	var m Measurement
	echo, err := dial(ctx)
	if err != nil {
		return m, fmt.Errorf("opening the ping connection: %w", err)
	}
	defer echo.Close()
	stop := context.AfterFunc(ctx, func() { echo.Close() })
	defer stop()
	if _, err := echo.Write([]byte{kindEcho}); err != nil {
		return m, fmt.Errorf("starting the pings: %w", err)
	}
	for range cfg.IdlePings {
		rtt, err := ping(echo)
		if err != nil {
			return m, fmt.Errorf("idle ping: %w", err)
		}
		m.IdleRTT = append(m.IdleRTT, rtt)
		time.Sleep(cfg.PingInterval / 2)
	}

	bulk, err := dial(ctx)
	if err != nil {
		return m, fmt.Errorf("opening the bulk connection: %w", err)
	}
	load, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	closeBulk := context.AfterFunc(load, func() { bulk.Close() })
	defer closeBulk()
	var wg sync.WaitGroup
	wg.Go(func() {
		chunk := make([]byte, 64<<10)
		chunk[0] = kindBulk
		if _, err := bulk.Write(chunk); err != nil {
			return
		}
		chunk[0] = 0
		for load.Err() == nil {
			if _, err := bulk.Write(chunk); err != nil {
				return
			}
		}
	})
	start := time.Now()
	steady := start.Add(cfg.Warmup)
	end := start.Add(cfg.Duration)
	tick := time.NewTicker(cfg.PingInterval)
	defer tick.Stop()
	var pingErr error
	for pingErr == nil && time.Now().Before(end) {
		select {
		case <-load.Done():
		case <-tick.C:
			sent := time.Now()
			rtt, err := ping(echo)
			if err != nil {
				pingErr = err
				break
			}
			if sent.After(steady) && sent.Add(rtt).Before(end) {
				m.LoadedRTT = append(m.LoadedRTT, rtt)
			}
		}
		if load.Err() != nil {
			break
		}
	}
	finished := time.Now()
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		return m, ctx.Err()
	}
	if pingErr != nil {
		return m, fmt.Errorf("ping under load: %w", pingErr)
	}
	to := end
	if finished.Before(end) {
		to = finished
	}
	m.Window = to.Sub(steady)
	m.Bytes = srv.bytesBetween(steady, to)
	return m, nil
}

// ping sends one byte and waits for its echo.
func ping(c net.Conn) (time.Duration, error) {
	b := []byte{'p'}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := c.Write(b); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Expectation is what the shaper was given.
type Expectation struct {
	RateBits   int64 `json:"rate_bits"`
	QueueBytes int64 `json:"queue_bytes"`
}

// FullQueueDelay is Q/R: how long a full queue takes to drain.
func (e Expectation) FullQueueDelay() time.Duration {
	if e.RateBits <= 0 {
		return 0
	}
	return time.Duration(float64(e.QueueBytes*8) / float64(e.RateBits) * float64(time.Second))
}

// The bounds Judge holds a measurement to. The rate is TCP payload, a
// few percent below the pipe's rate of whole packets (headers; on lo0's
// 16 KB MTU 0.3 %). A single CUBIC stream keeps a drop-tail queue between
// nearly full and, after each loss, about 30 % emptier, so the median
// delay under load sits below Q/R but well above half of it; a shaper
// that does not queue as modelled (no queue, or an unbounded one) falls
// outside.
const (
	MinRateRatio  = 0.85
	MaxRateRatio  = 1.03
	MinDelayRatio = 0.40
	MaxDelayRatio = 1.30
)

// Verdict is a measurement held against an Expectation.
type Verdict struct {
	// RateBits is the measured payload rate.
	RateBits float64 `json:"rate_bits"`
	// IdleRTT and LoadedRTT are the medians; QueueDelay their difference.
	IdleRTT    time.Duration `json:"idle_rtt_ns"`
	LoadedRTT  time.Duration `json:"loaded_rtt_ns"`
	QueueDelay time.Duration `json:"queue_delay_ns"`
	// Expected is what the pipe was given; ExpectedDelay is its Q/R.
	Expected      Expectation   `json:"expected"`
	ExpectedDelay time.Duration `json:"expected_delay_ns"`
	// RateRatio and DelayRatio are measured/expected.
	RateRatio  float64 `json:"rate_ratio"`
	DelayRatio float64 `json:"delay_ratio"`
	// Problems say what is outside the bounds; none means it shapes as
	// modelled.
	Problems []string `json:"problems,omitempty"`
}

// ErrNoSamples is Judge's answer for a measurement without data.
var ErrNoSamples = errors.New("the measurement has no samples")

// Judge holds m against e (see the bounds above).
func Judge(m Measurement, e Expectation) (Verdict, error) {
	if len(m.IdleRTT) == 0 || len(m.LoadedRTT) == 0 || m.Window <= 0 || e.RateBits <= 0 {
		return Verdict{}, ErrNoSamples
	}
	v := Verdict{Expected: e, ExpectedDelay: e.FullQueueDelay()}
	v.RateBits = float64(m.Bytes*8) / m.Window.Seconds()
	v.IdleRTT, v.LoadedRTT = median(m.IdleRTT), median(m.LoadedRTT)
	v.QueueDelay = max(v.LoadedRTT-v.IdleRTT, 0)
	v.RateRatio = v.RateBits / float64(e.RateBits)
	if v.ExpectedDelay > 0 {
		v.DelayRatio = float64(v.QueueDelay) / float64(v.ExpectedDelay)
	}
	if v.RateRatio < MinRateRatio || v.RateRatio > MaxRateRatio {
		v.Problems = append(v.Problems, fmt.Sprintf("the rate is %.0f %% of the pipe's (bounds %.0f–%.0f %%)", 100*v.RateRatio, 100*MinRateRatio, 100*MaxRateRatio))
	}
	if v.DelayRatio < MinDelayRatio || v.DelayRatio > MaxDelayRatio {
		v.Problems = append(v.Problems, fmt.Sprintf("the queueing delay is %.0f %% of a full queue's Q/R (bounds %.0f–%.0f %%)", 100*v.DelayRatio, 100*MinDelayRatio, 100*MaxDelayRatio))
	}
	return v, nil
}

// Measured summarises what was measured, e.g. "19.6 Mbit/s, queueing
// delay +88.1 ms (idle RTT 0.4 ms)".
func (v Verdict) Measured() string {
	return fmt.Sprintf("%.1f Mbit/s, queueing delay +%.1f ms (idle RTT %.1f ms)", v.RateBits/1e6, ms(v.QueueDelay), ms(v.IdleRTT))
}

// Model summarises what the pipe was given, e.g. "20.0 Mbit/s, +104.9 ms
// (a full 256 KB queue)".
func (v Verdict) Model() string {
	return fmt.Sprintf("%.1f Mbit/s, +%.1f ms (a full %d KB queue)", float64(v.Expected.RateBits)/1e6, ms(v.ExpectedDelay), v.Expected.QueueBytes/1024)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
