// SPDX-License-Identifier: Apache-2.0

// Package ifstat turns an interface's byte and packet counters into load
// samples: how many bytes and packets went each way in each sampling
// interval (default 200 ms), which is the achieved rate the controller
// compares with the shaper's rate.
//
// Sources: on macOS the net.link.generic.ifalldata sysctl (64-bit, exact;
// NOT the NET_RT_IFLIST2 dump, which the kernel rounds down to 1 KiB and
// truncates to 32 bits for third-party programs), falling back to
// NET_RT_IFLIST2 only when that sysctl fails; on Linux
// /sys/class/net/IF/statistics.
//
// Counters are not trusted blindly. Per field, an increase is the delta; a
// decrease from below 2^32 that leaves a plausible (< 2 GiB) delta is a
// 32-bit wrap; any other decrease is a reset (the interface was detached
// and re-attached, or the driver restarted) and the sample is marked
// invalid and the counters re-baselined. A change of interface index is a
// reset too. Packets that rise while bytes stay at zero (a reported macOS
// bug on some machines) make the sample invalid rather than report zero
// load. An interface that disappears yields invalid samples until it
// returns.
package ifstat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/macake/macake/config"
)

// DefaultInterval is the sampling period when Config gives none: the
// controller's (cake-autorate's monitor_achieved_rates_interval_ms), whose
// one home is config.Defaults.
var DefaultInterval = config.Defaults.Autorate.Internal.MonitorInterval

// ErrNoInterface is returned (wrapped) by a Reader when the interface does
// not exist (now).
var ErrNoInterface = errors.New("no such interface")

// Counters are an interface's cumulative counters as the OS reports them.
type Counters struct {
	RxBytes, TxBytes, RxPackets, TxPackets uint64
	// Index is the OS interface index, 0 when the source does not tell.
	// A different index under the same name is a new interface.
	Index int
	// Rounded is true when the byte counters come from a source that
	// rounds them (macOS NET_RT_IFLIST2: 1 KiB steps, 32 bits).
	Rounded bool
}

// Reader reads an interface's current counters. Implementations return an
// error wrapping ErrNoInterface when the interface is absent.
type Reader interface {
	Read(iface string) (Counters, error)
}

// LoadSample is what one interface carried during one interval.
type LoadSample struct {
	// At is when the counters were read.
	At time.Time
	// Interface is the interface's name.
	Interface string
	// Interval is the time since the previous reading.
	Interval time.Duration
	// RxBytes, TxBytes, RxPackets and TxPackets are the increases over
	// Interval (received = download, transmitted = upload).
	RxBytes, TxBytes, RxPackets, TxPackets uint64
	// Valid is false when the increases are not a measurement: the first
	// reading, a counter reset, a missing interface, a gap in sampling,
	// or bytes stuck at zero while packets rise. Problem says which.
	Valid   bool
	Problem string
	// Counters is the reading itself, the OS's cumulative counters, for
	// consumers that compute their own deltas (the controller's
	// LoadSample takes exactly these). ReadFailed is set, and Counters
	// zero, when the interface could not be read; Stuck when the byte
	// counters are stuck at zero while packets rise (forward neither).
	Counters   Counters
	ReadFailed bool
	Stuck      bool
}

// RxBitsPerSecond returns the receive rate over the interval (0 when not
// valid).
func (s LoadSample) RxBitsPerSecond() float64 { return s.rate(s.RxBytes) }

// TxBitsPerSecond returns the transmit rate over the interval (0 when not
// valid).
func (s LoadSample) TxBitsPerSecond() float64 { return s.rate(s.TxBytes) }

func (s LoadSample) rate(b uint64) float64 {
	if !s.Valid || s.Interval <= 0 {
		return 0
	}
	return float64(b) * 8 / s.Interval.Seconds()
}

// stuckPackets is how many packets must arrive in one interval with zero
// bytes before the byte counter is declared stuck.
const stuckPackets = 8

// counterDelta returns the increase of a cumulative counter, folding a
// 32-bit wrap; ok is false for a reset.
func counterDelta(prev, cur uint64) (d uint64, ok bool) {
	if cur >= prev {
		return cur - prev, true
	}
	if prev < 1<<32 {
		if d := cur + 1<<32 - prev; d < 1<<31 {
			return d, true
		}
	}
	return 0, false
}

// Delta is the load between two readings of one interface.
type Delta struct {
	RxBytes, TxBytes, RxPackets, TxPackets uint64
	// Reset is set when a counter went backwards (other than a 32-bit
	// wrap) or the interface index changed: the increases are unknown.
	Reset bool
	// Stuck is set when a byte counter stayed at zero while its packets
	// rose: the byte increases are wrong.
	Stuck bool
	// Problem explains Reset or Stuck.
	Problem string
}

// Diff computes the load between two readings of the same interface. It
// is the pure core of the Sampler.
func Diff(prev, cur Counters) Delta {
	if prev.Index != 0 && cur.Index != 0 && prev.Index != cur.Index {
		return Delta{Reset: true, Problem: fmt.Sprintf("interface index changed (%d -> %d): a new interface; counters re-baselined", prev.Index, cur.Index)}
	}
	var d Delta
	var ok [4]bool
	d.RxBytes, ok[0] = counterDelta(prev.RxBytes, cur.RxBytes)
	d.TxBytes, ok[1] = counterDelta(prev.TxBytes, cur.TxBytes)
	d.RxPackets, ok[2] = counterDelta(prev.RxPackets, cur.RxPackets)
	d.TxPackets, ok[3] = counterDelta(prev.TxPackets, cur.TxPackets)
	if !ok[0] || !ok[1] || !ok[2] || !ok[3] {
		return Delta{Reset: true, Problem: "counters went backwards (interface reset?); counters re-baselined"}
	}
	switch {
	case d.RxPackets >= stuckPackets && d.RxBytes == 0:
		d.Stuck, d.Problem = true, fmt.Sprintf("receive bytes stuck at 0 while %d packets arrived (a known macOS counter bug); load unknown", d.RxPackets)
	case d.TxPackets >= stuckPackets && d.TxBytes == 0:
		d.Stuck, d.Problem = true, fmt.Sprintf("transmit bytes stuck at 0 while %d packets left (a known macOS counter bug); load unknown", d.TxPackets)
	}
	return d
}

// Config configures a Sampler.
type Config struct {
	// Reader reads the counters (default: this OS's, see NewReader).
	Reader Reader
	// Interface to sample; may be changed with SetInterface.
	Interface string
	// Interval between readings (default 200 ms).
	Interval time.Duration
	// Buffer is the capacity of the Samples channel (default 256).
	Buffer int
}

// Sampler reads one interface's counters every Interval and delivers a
// LoadSample per reading. Delivery never blocks: when the consumer falls
// behind the oldest sample is dropped and counted.
type Sampler struct {
	cfg     Config
	samples chan LoadSample

	mu      sync.Mutex
	iface   string
	prev    Counters
	prevAt  time.Time
	havePrv bool
	dropped int
	wake    chan struct{}
}

// NewSampler returns a Sampler; start it with Run.
func NewSampler(cfg Config) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 256
	}
	if cfg.Reader == nil {
		cfg.Reader = NewReader()
	}
	return &Sampler{cfg: cfg, samples: make(chan LoadSample, cfg.Buffer), iface: cfg.Interface, wake: make(chan struct{}, 1)}
}

// Samples returns the channel of load samples; it is closed when Run
// returns.
func (s *Sampler) Samples() <-chan LoadSample { return s.samples }

// SetInterface switches to another interface (after a link change); the
// next sample re-baselines.
func (s *Sampler) SetInterface(name string) {
	s.mu.Lock()
	s.iface = name
	s.havePrv = false
	s.mu.Unlock()
}

// Rebaseline makes the next sample a new baseline, e.g. after the machine
// slept.
func (s *Sampler) Rebaseline() {
	s.mu.Lock()
	s.havePrv = false
	s.mu.Unlock()
}

// Dropped returns how many samples were discarded because the consumer
// fell behind.
func (s *Sampler) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Run samples until ctx is done, then closes the Samples channel. The
// first reading happens at once (an invalid baseline sample).
func (s *Sampler) Run(ctx context.Context) error {
	defer close(s.samples)
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	s.sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			_ = now
			s.sample(time.Now())
		}
	}
}

// Read takes one reading now and returns the sample, without delivering
// it; for callers that drive their own clock.
func (s *Sampler) Read(now time.Time) LoadSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readLocked(now)
}

func (s *Sampler) sample(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.readLocked(now)
	for {
		select {
		case s.samples <- ls:
			return
		default:
		}
		select {
		case <-s.samples:
			s.dropped++
		default:
		}
	}
}

// gapFactor: a reading later than this many intervals after the previous
// one (the process was stopped, the machine slept) is not a measurement.
const gapFactor = 5

func (s *Sampler) readLocked(now time.Time) LoadSample {
	ls := LoadSample{At: now, Interface: s.iface}
	c, err := s.cfg.Reader.Read(s.iface)
	if err != nil {
		s.havePrv = false
		ls.Problem, ls.ReadFailed = err.Error(), true
		return ls
	}
	ls.Counters = c
	if !s.havePrv {
		s.prev, s.prevAt, s.havePrv = c, now, true
		ls.Problem = "first reading (baseline)"
		return ls
	}
	ls.Interval = now.Sub(s.prevAt)
	d := Diff(s.prev, c)
	s.prev, s.prevAt = c, now
	ls.RxBytes, ls.TxBytes, ls.RxPackets, ls.TxPackets = d.RxBytes, d.TxBytes, d.RxPackets, d.TxPackets
	ls.Stuck = d.Stuck
	switch {
	case d.Problem != "":
		ls.Problem = d.Problem
	case ls.Interval > gapFactor*s.cfg.Interval:
		ls.Problem = fmt.Sprintf("sampling gap of %v (stopped process or sleep); counters re-baselined", ls.Interval.Round(time.Millisecond))
	default:
		ls.Valid = true
	}
	return ls
}
