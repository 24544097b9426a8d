// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"sort"
	"time"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim/trace"
)

// Link is what a run replays: each direction's capacity and the path's delay.
type Link struct {
	// Name identifies the link in tables ("starlink", a trace's name).
	Name string
	// Class groups links of one kind for per-class comparisons.
	Class string
	// Capacity holds each direction's capacity trace, indexed by
	// shape.Direction. Both must be set.
	Capacity [2]*trace.Trace
	// BaseRTT is the round-trip propagation delay without any queue.
	BaseRTT time.Duration
	// RTTSteps, when set, replace BaseRTT from each step's time on (for
	// Starlink's reconfiguration every 15 s); they repeat every RTTPeriod.
	RTTSteps  []RTTStep
	RTTPeriod time.Duration
	// Loss is the probability that the bottleneck of each direction loses
	// a packet for reasons other than a full queue (radio, handover).
	Loss [2]float64
	// Buffer is the bottleneck FIFO's size in seconds of mean capacity
	// when a run does not set one (0: the protocol's 1 s).
	Buffer time.Duration
	// BufferBytes, when set for a direction, is the bottleneck FIFO's size
	// in bytes, whatever the buffer time: a testbed sizes it from the
	// trace's peak (e2e: one second of it), not from its mean.
	BufferBytes [2]int64
	// Bounds, when set for a direction (Max > 0), are the min/base/max a
	// user of this link would configure; otherwise controllers get the
	// trace's p5/p25/p95 (benchmark.md §6.2), which on a constant link
	// would pin them at its capacity.
	Bounds [2]Bounds
	// MeanCapacity overrides the mean used to size the bottleneck buffer and
	// the fixed baseline, in bit/s per direction; 0 means the trace's own.
	MeanCapacity [2]float64
}

// RTTStep sets the base RTT from At on.
type RTTStep struct {
	At  time.Duration
	RTT time.Duration
}

// Validate reports a link the simulator cannot run.
func (l *Link) Validate() error {
	for _, d := range shape.Directions {
		tr := l.Capacity[d]
		if tr == nil {
			return fmt.Errorf("link %s: no %s capacity", l.Name, d)
		}
		if err := tr.Validate(); err != nil {
			return fmt.Errorf("link %s: %w", l.Name, err)
		}
		if l.Loss[d] < 0 || l.Loss[d] >= 1 {
			return fmt.Errorf("link %s: %s loss %v is not a probability below 1", l.Name, d, l.Loss[d])
		}
	}
	if l.BaseRTT <= 0 && len(l.RTTSteps) == 0 {
		return fmt.Errorf("link %s: base RTT must be positive", l.Name)
	}
	for i, s := range l.RTTSteps {
		if s.RTT <= 0 || (i > 0 && s.At <= l.RTTSteps[i-1].At) || s.At < 0 {
			return fmt.Errorf("link %s: RTT steps must be positive and in time order", l.Name)
		}
		if l.RTTPeriod > 0 && s.At >= l.RTTPeriod {
			return fmt.Errorf("link %s: RTT step at %v is beyond the period %v", l.Name, s.At, l.RTTPeriod)
		}
	}
	return nil
}

// Mean returns the mean capacity of direction d in bit/s.
func (l *Link) Mean(d shape.Direction) float64 {
	if l.MeanCapacity[d] > 0 {
		return l.MeanCapacity[d]
	}
	return l.Capacity[d].Mean()
}

// RTTAt returns the base round-trip time at t.
func (l *Link) RTTAt(t time.Duration) time.Duration {
	if len(l.RTTSteps) == 0 {
		return l.BaseRTT
	}
	if l.RTTPeriod > 0 {
		t %= l.RTTPeriod
	}
	i := sort.Search(len(l.RTTSteps), func(i int) bool { return l.RTTSteps[i].At > t }) - 1
	if i < 0 {
		if l.RTTPeriod > 0 {
			return l.RTTSteps[len(l.RTTSteps)-1].RTT // wrapped from the previous period
		}
		if l.BaseRTT > 0 {
			return l.BaseRTT
		}
		return l.RTTSteps[0].RTT
	}
	return l.RTTSteps[i].RTT
}

// MinRTT is the smallest base RTT the link ever has: the idle baseline a
// daemon would measure.
func (l *Link) MinRTT() time.Duration {
	m := l.BaseRTT
	for _, s := range l.RTTSteps {
		if m <= 0 || s.RTT < m {
			m = s.RTT
		}
	}
	return m
}

// schedule walks a capacity trace's delivery opportunities forward in
// simulated time (ns), looping at the trace's period. Rate series are paced
// into 1500-byte opportunities (one every 12000/r s), as mahimahi would
// replay them.
type schedule struct {
	tr     *trace.Trace
	period int64 // ns

	// next is the time of the next unused opportunity, in ns of sim time.
	next int64

	// mahimahi state
	idx  int   // index of next in Opportunities
	base int64 // sim time of the current loop's trace time 0

	// rate-series state: position and accumulated bit·ns toward the next
	// opportunity
	pos int64 // sim time up to which capacity has been accumulated
	acc int64
}

const opportunityBitNS = trace.OpportunityBits * int64(time.Second)

// newSchedule starts the trace at offset (trace time) at sim time 0.
func newSchedule(tr *trace.Trace, offset time.Duration) *schedule {
	s := &schedule{tr: tr, period: int64(tr.Period())}
	off := int64(offset) % s.period
	if off < 0 { // Options.Validate rejects it; a direct caller wraps
		off += s.period
	}
	if len(tr.Opportunities) > 0 {
		s.base = -off
		s.idx = sort.Search(len(tr.Opportunities), func(i int) bool {
			return tr.Opportunities[i]*int64(time.Millisecond) >= off
		})
		if s.idx == len(tr.Opportunities) {
			s.idx = 0
			s.base += s.period
		}
		s.next = s.base + tr.Opportunities[s.idx]*int64(time.Millisecond)
		return s
	}
	s.base = -off
	s.pos = 0
	s.computeNext()
	return s
}

// advance consumes the opportunity at s.next and finds the following one.
func (s *schedule) advance() {
	if len(s.tr.Opportunities) > 0 {
		s.idx++
		if s.idx == len(s.tr.Opportunities) {
			s.idx = 0
			s.base += s.period
		}
		s.next = s.base + s.tr.Opportunities[s.idx]*int64(time.Millisecond)
		return
	}
	s.pos = s.next
	s.computeNext()
}

// seek skips opportunities before now: they found the queue empty and are
// lost, as in mahimahi. The grid of a paced rate series stays where it was.
func (s *schedule) seek(now int64) {
	for s.next < now {
		s.advance()
	}
}

// computeNext finds the time at which 12000 bits of capacity will have
// accumulated from pos, walking across rate steps and loops.
func (s *schedule) computeNext() {
	step := int64(s.tr.Step)
	rates := s.tr.Rates
	t := s.pos
	for guard := 0; ; guard++ {
		rel := t - s.base
		if rel >= s.period {
			s.base += s.period
			continue
		}
		i := rel / step
		end := s.base + (i+1)*step
		r := rates[i]
		need := opportunityBitNS - s.acc
		if r > 0 {
			dt := (need + r - 1) / r
			if t+dt <= end {
				s.next = t + dt
				s.acc = r*dt - need
				return
			}
			s.acc += r * (end - t)
		}
		t = end
		if guard > 4*len(rates)+8 && s.acc == 0 {
			// Validate guarantees some capacity; this only protects against
			// a trace edited underneath a running schedule.
			s.next = t + int64(time.Hour)
			return
		}
	}
}

// capacityBins returns the capacity, in bits, of each bin of the given
// width from sim time 0 to duration: the opportunities a bottleneck could
// use.
func capacityBins(tr *trace.Trace, offset, duration, width time.Duration) []int64 {
	n := int((duration + width - 1) / width)
	out := make([]int64, n)
	s := newSchedule(tr, offset)
	for s.next < int64(duration) {
		if s.next >= 0 {
			out[s.next/int64(width)] += trace.OpportunityBits
		}
		s.advance()
	}
	return out
}
