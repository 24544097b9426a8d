// SPDX-License-Identifier: Apache-2.0

// Package score is the figure of merit every macake measurement reports
// (../shared/reference/benchmark.md §4.2), in one place: the score
// U/(1 + D95/30 ms), the delay percentiles it is taken from, and what an
// interactive flow (a call, a game) felt.
//
// The percentiles are taken over every packet sent in the window, a lost
// one counting as a delay of LostDelay (1 s by default): to the person on
// a call a dropped packet is a glitch or a lag spike, not a sample that
// never happened. A score over the survivors only would reward a shaper
// for shrinking its queue until it drops the user's packets (issue 24:
// on a kernel LTE replay a four-packet queue lost 12.9 % of the pings and
// scored 1.45× upstream over the survivors, 0.21× once losses counted).
// The loss itself is always reported beside the score.
//
// The simulator (sim), the kernel testbed (e2e), `make bench`, `make
// calibrate` and `macake bench --compare` all use this package, so that a
// score means the same thing wherever it is printed.
package score

import (
	"math"
	"slices"
	"time"
)

// Reference is the delay at which the score halves: the Waveform "A"
// boundary (benchmark.md §4.2).
const Reference = 30 * time.Millisecond

// DefaultLostDelay is the delay a lost packet counts as, when a caller
// sets none (the flags --lost-delay and -e2e.lost-delay default to it).
const DefaultLostDelay = time.Second

// Score is benchmark.md's figure of merit: the utilisation u discounted by
// the 95th-percentile added delay d95 (taken over every packet sent, see
// Delays). It equals u with no added delay and halves at Reference.
func Score(u float64, d95 time.Duration) float64 {
	return u / (1 + d95.Seconds()/Reference.Seconds())
}

// LostOrDefault returns d, or DefaultLostDelay when d is not positive.
func LostOrDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultLostDelay
	}
	return d
}

// Percentile returns the p-th percentile (0–100) of asc, which must be
// sorted ascending, interpolating linearly between the two nearest ranks;
// 0 when asc is empty.
func Percentile(asc []float64, p float64) float64 {
	switch len(asc) {
	case 0:
		return 0
	case 1:
		return asc[0]
	}
	pos := p / 100 * float64(len(asc)-1)
	if pos <= 0 {
		return asc[0]
	}
	lo := int(pos)
	if lo >= len(asc)-1 {
		return asc[len(asc)-1]
	}
	frac := pos - float64(lo)
	return asc[lo] + float64(frac*(asc[lo+1]-asc[lo]))
}

// Delays is one window of packets: the delays, in ms, of those that
// arrived (in the order they were sent, for Jitter), and how many were
// lost.
type Delays struct {
	Delivered []float64
	Lost      int
}

// Sent is how many packets the window holds, delivered or lost.
func (d Delays) Sent() int { return len(d.Delivered) + d.Lost }

// Loss is the share of the packets sent that were lost (0 with none
// sent).
func (d Delays) Loss() float64 {
	if d.Sent() == 0 {
		return 0
	}
	return float64(d.Lost) / float64(d.Sent())
}

// All returns the delay of every packet sent, ascending, a lost one
// counted as lost (its delay in ms): the values the percentiles of a
// score are taken from.
func (d Delays) All(lost float64) []float64 {
	out := make([]float64, 0, d.Sent())
	out = append(out, d.Delivered...)
	for range d.Lost {
		out = append(out, lost)
	}
	slices.Sort(out)
	return out
}

// Jitter is the mean absolute difference of the delays of consecutive
// delivered packets, in ms (RFC 3550's interarrival jitter without its
// 1/16 smoothing), or 0 with fewer than two delivered.
func (d Delays) Jitter() float64 {
	if len(d.Delivered) < 2 {
		return 0
	}
	var sum float64
	for i := 1; i < len(d.Delivered); i++ {
		sum += math.Abs(d.Delivered[i] - d.Delivered[i-1])
	}
	return sum / float64(len(d.Delivered)-1)
}

// Flow is what one direction of an interactive flow felt over a window:
// how many packets were sent and lost, the one-way delay percentiles over
// every packet sent (a lost one counted as the lost delay), and the
// jitter between consecutive packets received. Delays are in ms.
type Flow struct {
	Sent   int     `json:"sent"`
	Lost   int     `json:"lost"`
	Loss   float64 `json:"loss"`
	P50    float64 `json:"owd_p50_ms"`
	P90    float64 `json:"owd_p90_ms"`
	P99    float64 `json:"owd_p99_ms"`
	Jitter float64 `json:"jitter_ms"`
}

// FlowOf summarises d, a lost packet counting as lost.
func FlowOf(d Delays, lost time.Duration) Flow {
	f := Flow{Sent: d.Sent(), Lost: d.Lost, Loss: d.Loss(), Jitter: d.Jitter()}
	if f.Sent == 0 {
		return f
	}
	all := d.All(Ms(lost))
	f.P50, f.P90, f.P99 = Percentile(all, 50), Percentile(all, 90), Percentile(all, 99)
	return f
}

// Ms converts a duration to the milliseconds the windows hold.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
