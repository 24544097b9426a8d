// SPDX-License-Identifier: Apache-2.0

// Package trace reads link-capacity traces and describes them: mahimahi
// delivery-opportunity files and per-second rate series (NYU-METS, 5Gophers,
// Starlink-on-the-Road CSVs), as ../shared/reference/benchmark.md §7.1 and
// the traces' README define them. A Trace is one direction's capacity over
// time; the simulator replays it in a loop, and Stats computes the
// statistics of benchmark.md §7.3 so that parsing can be checked against the
// published table.
package trace

import (
	"fmt"
	"time"

	"github.com/macake/macake/shape"
)

// OpportunityBits is the size of one mahimahi delivery opportunity: one
// 1500-byte packet.
const OpportunityBits = 12000

// Trace is the capacity of one direction of a link over time. Exactly one of
// Opportunities and Rates is set.
type Trace struct {
	// Name identifies the trace in tables, e.g. "mahimahi/TMobile-LTE-short.down"
	// or "starlink-road/iperf.csv:download_mbps".
	Name string
	// Direction is the direction the trace was recorded in.
	Direction shape.Direction
	// Class groups traces of one kind of link (starlink, cellular, 5g,
	// lte-tcp, or a built-in model's name), for per-class comparisons.
	Class string

	// Opportunities are mahimahi delivery-opportunity timestamps in ms from
	// the trace start, non-decreasing. Each lets one 1500-byte packet's worth
	// of bytes leave the bottleneck. Replay loops with period Period().
	Opportunities []int64

	// Rates is a piecewise-constant capacity in bit/s, one value per Step.
	Rates []int64
	// Step is the duration of each Rates sample (1 s for the CSV series).
	Step time.Duration
	// SegmentStarts lists the indexes in Rates where a new measurement run
	// starts (index 0 is implied). Runs are concatenated for replay, but
	// statistics never pair samples across a boundary.
	SegmentStarts []int
}

// Period is the length of one replay loop: the last opportunity timestamp
// for mahimahi (mm-link's wrap rule), len(Rates)·Step for a rate series.
func (t *Trace) Period() time.Duration {
	if len(t.Opportunities) > 0 {
		return time.Duration(t.Opportunities[len(t.Opportunities)-1]) * time.Millisecond
	}
	return time.Duration(len(t.Rates)) * t.Step
}

// Validate reports a trace that cannot be replayed.
func (t *Trace) Validate() error {
	switch {
	case len(t.Opportunities) > 0 && len(t.Rates) > 0:
		return fmt.Errorf("trace %s: both opportunities and rates set", t.Name)
	case len(t.Opportunities) > 0:
		if t.Opportunities[len(t.Opportunities)-1] <= 0 {
			return fmt.Errorf("trace %s: last timestamp is 0 ms, so the trace has no duration to loop over", t.Name)
		}
		return nil
	case len(t.Rates) > 0:
		if t.Step <= 0 {
			return fmt.Errorf("trace %s: rate series without a step", t.Name)
		}
		var total int64
		for _, r := range t.Rates {
			if r < 0 {
				return fmt.Errorf("trace %s: negative rate", t.Name)
			}
			total += r
		}
		if total == 0 {
			return fmt.Errorf("trace %s: capacity is zero throughout", t.Name)
		}
		return nil
	}
	return fmt.Errorf("trace %s: no samples", t.Name)
}

// Bins returns the capacity in bit/s of consecutive bins of the given width
// over one period. A trailing partial bin is dropped (benchmark.md §7.3), and
// so is, for rate series, nothing: their bins are exact.
func (t *Trace) Bins(width time.Duration) []float64 {
	if width <= 0 {
		return nil
	}
	period := t.Period()
	if len(t.Opportunities) > 0 {
		last := t.Opportunities[len(t.Opportunities)-1]
		wms := width.Milliseconds()
		if wms <= 0 {
			return nil
		}
		// The §7.3 rule: bins 0..last/w, minus a trailing partial one.
		n := last/wms + 1
		if (last+1)%wms != 0 && n > 1 {
			n--
		}
		out := make([]float64, n)
		for _, ts := range t.Opportunities {
			if b := ts / wms; b < n {
				out[b] += OpportunityBits
			}
		}
		scale := float64(time.Second) / float64(width)
		for i := range out {
			out[i] *= scale
		}
		return out
	}
	n := int(period / width)
	out := make([]float64, n)
	for i := range out {
		out[i] = t.meanRate(time.Duration(i)*width, time.Duration(i+1)*width)
	}
	return out
}

// meanRate is the mean capacity of a rate series over [from, to) within one
// period.
func (t *Trace) meanRate(from, to time.Duration) float64 {
	var bits float64
	for at := from; at < to; {
		i := int(at / t.Step)
		end := time.Duration(i+1) * t.Step
		if end > to {
			end = to
		}
		bits += float64(t.Rates[i]) * (end - at).Seconds()
		at = end
	}
	return bits / (to - from).Seconds()
}

// Mean is the mean capacity in bit/s over 1-s bins, the "mean" of
// benchmark.md §7.3; fixed baselines shape at 95 % of it.
func (t *Trace) Mean() float64 {
	bins := t.Bins(time.Second)
	if len(bins) == 0 {
		return t.exactMean()
	}
	return sum(bins) / float64(len(bins))
}

// exactMean is the capacity over the whole period, for traces shorter than a
// second.
func (t *Trace) exactMean() float64 {
	p := t.Period().Seconds()
	if p <= 0 {
		return 0
	}
	if len(t.Opportunities) > 0 {
		return float64(len(t.Opportunities)) * OpportunityBits / p
	}
	return t.meanRate(0, t.Period())
}

// Percentile returns the p-th percentile (0–100) of the 1-s capacity bins in
// bit/s, with linear interpolation between order statistics.
func (t *Trace) Percentile(p float64) float64 {
	bins := t.Bins(time.Second)
	if len(bins) == 0 {
		return t.exactMean()
	}
	return Percentile(sorted(bins), p)
}

// OutageShare defines an outage (benchmark.md §7.3): a 1-s bin below this
// share of the trace's mean capacity.
const OutageShare = 0.1

// ActivePercentile is Percentile over the 1-s bins that are not outages
// (OutageShare). A controller's bounds come from it: on a trace with long
// stretches at zero the plain percentiles sit at zero too, and a minimum,
// base and maximum at nothing would pin every controller to the floor and
// measure nothing. A trace that is all outage falls back to all its bins.
func (t *Trace) ActivePercentile(p float64) float64 {
	bins := t.Bins(time.Second)
	if len(bins) == 0 {
		return t.exactMean()
	}
	limit := OutageShare * sum(bins) / float64(len(bins))
	active := make([]float64, 0, len(bins))
	for _, b := range bins {
		if b >= limit {
			active = append(active, b)
		}
	}
	if len(active) == 0 {
		active = bins
	}
	return Percentile(sorted(active), p)
}

// Rebin returns the trace as a piecewise-constant rate series with the
// given step: the mean capacity of each bin. It is how a kernel testbed
// replays a trace (one shaper rate per 100 ms), as opposed to mahimahi's
// exact delivery opportunities.
func (t *Trace) Rebin(step time.Duration) *Trace {
	bins := t.Bins(step)
	out := &Trace{Name: t.Name, Direction: t.Direction, Class: t.Class, Step: step, Rates: make([]int64, len(bins))}
	for i, b := range bins {
		out.Rates[i] = int64(b)
	}
	return out
}
