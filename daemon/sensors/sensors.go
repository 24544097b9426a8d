// SPDX-License-Identifier: Apache-2.0

// Package sensors is the daemon's seam to the world it senses: what opens
// an active link's prober and counter reader (Opener, with System the
// real one over sense/probe and sense/ifstat) and what watches the
// network's state (FactsWatcher, with LinkFacts over sense/linkfacts),
// and the conversions of their readings for the controller. Tests pass
// fakes of the interfaces.
package sensors

import (
	"context"
	"net/netip"
	"time"

	"github.com/macake/macake/controller"
	"github.com/macake/macake/internal/tickgrid"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
)

// Opener opens the sensors that measure one active link for its
// controller: delays to the
// reflectors (a prober: ICMP, or TCP or UDP where the policy says) and the
// interface's byte counters. The
// daemon opens one Probe and one Counters per active link and closes them
// (by ending Run's context) when the link goes away. System is the real
// one; tests pass fakes.
type Opener interface {
	// Probe returns a prober for a link's reflectors (spec). It probes
	// nothing until SetReflectors.
	Probe(spec ProbeSpec) (Probe, error)
	// Counters returns a reader of iface's byte counters, which the
	// daemon reads every interval.
	Counters(iface string, interval time.Duration) (Counters, error)
}

// ProbeSpec is what a link's prober is for.
type ProbeSpec struct {
	// Link names the link.
	Link string
	// Interface is the link's interface: every probe leaves through it
	// and only replies arriving on it count (so that each link measures
	// its own path, not the default route's).
	Interface string
	// Interval is the time between two probes to one reflector.
	Interval time.Duration
	// Probes says how each of the link's reflectors is probed
	// (desired.Probes); an address not in it is probed with ICMP.
	Probes []shape.Reflector
	// Grid is the daemon's timer grid: probes after the first fire on
	// it, with the link's counter reads (probe.Config.Grid).
	Grid tickgrid.Grid
}

// Probe measures the delay to a set of reflectors; *probe.Prober is one.
// The daemon reads Samples itself, so a reply reaches the controller with
// one goroutine hop (a sample costs more in wake-ups than in work).
type Probe interface {
	// Run probes until ctx ends, then closes Samples.
	Run(ctx context.Context) error
	// Samples delivers the outcome of every probe.
	Samples() <-chan probe.Sample
	// SetReflectors replaces the set of reflectors to probe.
	SetReflectors(addrs []netip.Addr) error
	// SetPaused stops (true) or resumes (false) probing.
	SetPaused(paused bool)
}

// Counters reads an interface's byte and packet counters; *ifstat.Sampler
// is one. The daemon reads them on the link's own goroutine every
// interval (Opener.Counters), so a reading costs no goroutine hand-off.
type Counters interface {
	// Read takes one reading now: the increases since the previous
	// reading, or a baseline or a problem (ifstat.LoadSample.Valid).
	Read(now time.Time) ifstat.LoadSample
}

// DelaySample converts a probe's reply for the controller: one-way delays
// when the probe measured them (ICMP timestamps), else the round trip.
func DelaySample(s probe.Sample) controller.DelaySample {
	if s.OWD {
		return controller.DelaySample{Reflector: s.Reflector, At: s.Received, DownOWD: s.DownOWD, UpOWD: s.UpOWD, Method: controller.ICMPTimestamp}
	}
	return controller.RTTSample(s.Reflector, s.Received, s.RTT)
}

// LoadSample converts a counter reading for the controller, which takes
// the cumulative counters and works out deltas, wraps and resets itself.
// ok is false for readings that failed or whose byte counters are stuck.
func LoadSample(ls ifstat.LoadSample) (controller.LoadSample, bool) {
	if ls.ReadFailed || ls.Stuck {
		return controller.LoadSample{}, false
	}
	k := ls.Counters
	return controller.LoadSample{At: ls.At, RxBytes: k.RxBytes, TxBytes: k.TxBytes, RxPackets: k.RxPackets, TxPackets: k.TxPackets}, true
}

// sampleBuffer is the capacity of a prober's samples channel in the
// daemon: the link's goroutine reads it as samples come, a send's replies
// at most a few at once, so the prober's default (1024 samples,
// 130 KB a link, for consumers that may fall behind) would only be heap.
const sampleBuffer = 64

// System is the real Opener: the prober (sense/probe) and the
// interface byte counters (sense/ifstat).
type System struct {
	// Timeout is how long a probe waits for its reply; 0 is
	// probe.DefaultTimeout.
	Timeout time.Duration
	// Reader reads the counters; nil is this OS's.
	Reader ifstat.Reader
}

// Probe implements Opener with a probe.Prober bound to the link's
// interface; its sockets open with the first reflectors.
func (s System) Probe(spec ProbeSpec) (Probe, error) {
	p, err := probe.New(probe.Config{Interval: spec.Interval, Timeout: s.Timeout, Probes: spec.Probes, Interface: spec.Interface, Buffer: sampleBuffer, Grid: spec.Grid})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Counters implements Opener with an ifstat.Sampler.
func (s System) Counters(iface string, interval time.Duration) (Counters, error) {
	// The daemon calls Read itself and never Run, so the samples channel
	// is never used: the smallest there is.
	return ifstat.NewSampler(ifstat.Config{Reader: s.Reader, Interface: iface, Interval: interval, Buffer: 1}), nil
}
