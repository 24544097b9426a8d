// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"net/netip"
	"time"

	"github.com/macake/macake/controller"
)

// Sensors measure one active link for its controller: delays to the
// reflectors (an ICMP prober) and the interface's byte counters. The
// daemon opens one Probe and one Counters per active link and closes them
// (by ending Run's context) when the link goes away. Tests pass fakes.
type Sensors interface {
	// Probe returns a prober for the named link's reflectors, probing each
	// one every interval. It probes nothing until SetReflectors.
	Probe(link string, interval time.Duration) (Probe, error)
	// Counters returns a sampler of iface's byte counters, one reading
	// every interval.
	Counters(iface string, interval time.Duration) (Counters, error)
}

// Probe measures the delay to a set of reflectors.
type Probe interface {
	// Run probes until ctx ends, sending the outcome of every probe to
	// out. It never closes out.
	Run(ctx context.Context, out chan<- ProbeSample) error
	// SetReflectors replaces the set of reflectors to probe.
	SetReflectors(addrs []netip.Addr) error
	// SetPaused stops (true) or resumes (false) probing.
	SetPaused(paused bool)
}

// ProbeSample is the outcome of one probe.
type ProbeSample struct {
	Reflector netip.Addr
	// Lost is set when no reply came in time (or the probe could not be
	// sent); the other fields are then zero.
	Lost bool
	// Received is when the reply arrived; RTT the round trip.
	Received time.Time
	RTT      time.Duration
	// OneWay is set when Down and Up are one-way delays (ICMP timestamps).
	OneWay   bool
	Down, Up time.Duration
}

// delaySample converts a reply for the controller: one-way delays when
// the probe measured them, else half the round trip each way.
func (s ProbeSample) delaySample() controller.DelaySample {
	if s.OneWay {
		return controller.DelaySample{Reflector: s.Reflector, At: s.Received, DownOWD: s.Down, UpOWD: s.Up, Method: controller.ICMPTimestamp}
	}
	return controller.RTTSample(s.Reflector, s.Received, s.RTT)
}

// Counters reads an interface's cumulative byte and packet counters.
type Counters interface {
	// Run sends one reading per interval to out until ctx ends; readings
	// that failed are left out. It never closes out.
	Run(ctx context.Context, out chan<- controller.LoadSample) error
}
