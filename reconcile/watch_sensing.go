// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"net/netip"
	"time"

	"github.com/macake/macake/controller"
	"github.com/macake/macake/controller/ifstat"
	"github.com/macake/macake/controller/probe"
	"github.com/macake/macake/reconcile/linkfacts"
)

// SystemSensors are the real sensors: ICMP probes (controller/probe) and
// the interface byte counters (controller/ifstat).
type SystemSensors struct {
	// Timeout is how long a probe waits for its reply; 0 is
	// probe.DefaultTimeout.
	Timeout time.Duration
	// Reader reads the counters; nil is this OS's.
	Reader ifstat.Reader
}

// Probe implements Sensors with a probe.Prober. Its sockets open with the
// first reflectors.
func (s SystemSensors) Probe(link string, interval time.Duration) (Probe, error) {
	p, err := probe.New(probe.Config{Interval: interval, Timeout: s.Timeout})
	if err != nil {
		return nil, err
	}
	return systemProbe{p}, nil
}

type systemProbe struct{ p *probe.Prober }

func (s systemProbe) SetReflectors(addrs []netip.Addr) error { return s.p.SetReflectors(addrs) }
func (s systemProbe) SetPaused(paused bool)                  { s.p.SetPaused(paused) }

// Run runs the prober and converts its samples.
func (s systemProbe) Run(ctx context.Context, out chan<- ProbeSample) error {
	done := make(chan error, 1)
	go func() { done <- s.p.Run(ctx) }()
	for smp := range s.p.Samples() {
		ps := ProbeSample{Reflector: smp.Reflector, Lost: smp.Kind != probe.KindReply}
		if !ps.Lost {
			ps.Received, ps.RTT = smp.Received, smp.RTT
			if smp.OWD {
				ps.OneWay, ps.Down, ps.Up = true, smp.DownOWD, smp.UpOWD
			}
		}
		select {
		case out <- ps:
		case <-ctx.Done():
		}
	}
	return <-done
}

// Counters implements Sensors with an ifstat.Sampler.
func (s SystemSensors) Counters(iface string, interval time.Duration) (Counters, error) {
	return systemCounters{ifstat.NewSampler(ifstat.Config{Reader: s.Reader, Interface: iface, Interval: interval})}, nil
}

type systemCounters struct{ s *ifstat.Sampler }

// Run runs the sampler and passes every reading on as the cumulative
// counters the controller takes (it computes its own deltas, wraps and
// resets included); failed readings are left out.
func (c systemCounters) Run(ctx context.Context, out chan<- controller.LoadSample) error {
	done := make(chan error, 1)
	go func() { done <- c.s.Run(ctx) }()
	for ls := range c.s.Samples() {
		if ls.ReadFailed || ls.Stuck {
			continue
		}
		k := ls.Counters
		select {
		case out <- controller.LoadSample{At: ls.At, RxBytes: k.RxBytes, TxBytes: k.TxBytes, RxPackets: k.RxPackets, TxPackets: k.TxPackets}:
		case <-ctx.Done():
		}
	}
	return <-done
}

// LinkFacts is the FactsWatcher of the sensing code: linkfacts.Watch on a
// source (the routing socket or netlink, or the MACAKE_LINK_FACTS file,
// whose rewrites count as network changes), with its sleep detection.
type LinkFacts struct {
	Source linkfacts.Source
	Config linkfacts.WatchConfig
}

// Watch implements FactsWatcher.
func (l LinkFacts) Watch(ctx context.Context) <-chan FactsEvent {
	out := make(chan FactsEvent, 1)
	in := linkfacts.Watch(ctx, l.Source, l.Config)
	go func() {
		defer close(out)
		for ev := range in {
			sendFacts(out, FactsEvent{Facts: ev.Facts, Reason: ev.Reason, Woke: ev.Woke, Slept: ev.Slept, Err: ev.Err})
		}
	}()
	return out
}
