// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Percentile returns the p-th percentile (0 < p ≤ 100) of ds by the
// nearest-rank method, or -1 when ds is empty. ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(p/100*float64(len(s)) + 0.999999999)
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Summary describes one target's round-trip times in one window.
type Summary struct {
	Samples int
	Lost    int // lost or unreachable probes
	Min     time.Duration
	P50     time.Duration
	P90     time.Duration
	// TM95 is the mean of the lowest 95 % of the samples (the IPPM
	// responsiveness draft's single-sided trimmed mean), -1 without
	// samples.
	TM95 time.Duration
}

// Summarize computes a Summary (percentiles are -1 without samples).
func Summarize(rtts []time.Duration, lost int) Summary {
	return Summary{Samples: len(rtts), Lost: lost, Min: Percentile(rtts, 0.0001), P50: Percentile(rtts, 50), P90: Percentile(rtts, 90),
		TM95: TrimmedMean(rtts, 95)}
}

// TrimmedMean returns the mean of the lowest keep percent of ds (at least
// one value), or -1 when ds is empty. ds is not modified.
func TrimmedMean(ds []time.Duration, keep float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := max(1, int(keep/100*float64(len(s))))
	var sum time.Duration
	for _, d := range s[:n] {
		sum += d
	}
	return sum / time.Duration(n)
}

// Added is the latency a load added, like for like: at each percentile,
// the loaded value minus the idle value of the same target, then the
// median of those differences over the targets that have both. Comparing
// loaded p90 with the idle minimum would blame the load for ordinary
// jitter; this never does.
type Added struct {
	P50, P90 time.Duration
	// Targets is how many targets had samples in both windows.
	Targets int
}

// LikeForLike computes Added from per-target summaries.
func LikeForLike(idle, loaded map[netip.Addr]Summary) Added {
	var d50, d90 []time.Duration
	for a, l := range loaded {
		i, ok := idle[a]
		if !ok || i.Samples == 0 || l.Samples == 0 {
			continue
		}
		d50 = append(d50, l.P50-i.P50)
		d90 = append(d90, l.P90-i.P90)
	}
	if len(d50) == 0 {
		return Added{P50: -1, P90: -1}
	}
	return Added{P50: Median(d50), P90: Median(d90), Targets: len(d50)}
}

// Median returns the median of ds (the mean of the two middle values for
// an even count), or -1 when ds is empty.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// Recorder keeps every sample of a measurement, for per-window summaries.
// It is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	samples []Sample
}

// Add records a sample.
func (r *Recorder) Add(s Sample) {
	r.mu.Lock()
	r.samples = append(r.samples, s)
	r.mu.Unlock()
}

// Window summarizes target's probes sent in [from, to), over the replies.
func (r *Recorder) Window(target netip.Addr, from, to time.Time) Summary {
	return Summarize(r.window(target, from, to))
}

// WindowCounting summarizes target's probes sent in [from, to) as package
// score takes a score's percentiles: over every probe sent, a lost one
// counting as a round trip of lostRTT (Samples and Lost still count the
// replies and the losses).
func (r *Recorder) WindowCounting(target netip.Addr, from, to time.Time, lostRTT time.Duration) Summary {
	rtts, lost := r.window(target, from, to)
	all := slices.Clone(rtts)
	for range lost {
		all = append(all, lostRTT)
	}
	s := Summarize(all, 0)
	s.Samples, s.Lost = len(rtts), lost
	return s
}

// window returns the round trips of target's replies to the probes sent
// in [from, to), and how many of those probes got none.
func (r *Recorder) window(target netip.Addr, from, to time.Time) (rtts []time.Duration, lost int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		if s.Reflector != target || s.Sent.Before(from) || !s.Sent.Before(to) {
			continue
		}
		if s.Kind == KindReply {
			rtts = append(rtts, s.RTT)
		} else {
			lost++
		}
	}
	return rtts, lost
}

// Windows summarizes each target in [from, to).
func (r *Recorder) Windows(targets []netip.Addr, from, to time.Time) map[netip.Addr]Summary {
	m := map[netip.Addr]Summary{}
	for _, t := range targets {
		m[t] = r.Window(t, from, to)
	}
	return m
}

// Baseline follows a reflector's uncongested delay the way cake-autorate
// does: it drops at once towards a lower sample (α = 0.9) and creeps up
// slowly (α = 0.001, minutes at 20 Hz), so queueing shows as a delta above
// it rather than moving it. Unlike the controller's slots it starts at the
// first sample instead of 100 ms, since it only reports.
type Baseline struct {
	value time.Duration
	ok    bool
}

// Update feeds one delay and returns the delta above the updated baseline.
func (b *Baseline) Update(d time.Duration) time.Duration {
	if !b.ok {
		b.value, b.ok = d, true
		return 0
	}
	alpha := 0.001
	if d < b.value {
		alpha = 0.9
	}
	b.value = time.Duration(alpha*float64(d) + (1-alpha)*float64(b.value))
	return d - b.value
}

// Value returns the baseline (0 before the first sample).
func (b *Baseline) Value() time.Duration { return b.value }
