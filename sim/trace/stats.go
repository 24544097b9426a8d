// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"math"
	"sort"
	"time"

	"github.com/macake/macake/score"
)

// Stats are the capacity statistics of benchmark.md §7.3, in Mbit/s where
// they are rates, computed on 1-s bins.
type Stats struct {
	Bins                   int     `json:"covered_s"`
	Mean                   float64 `json:"mean"`
	Min                    float64 `json:"min"`
	P5                     float64 `json:"p5"`
	P25                    float64 `json:"p25"`
	P50                    float64 `json:"p50"`
	P75                    float64 `json:"p75"`
	P95                    float64 `json:"p95"`
	Max                    float64 `json:"max"`
	CV                     float64 `json:"cv"`
	OutageFrac             float64 `json:"outage_frac"`
	WorstDrop              float64 `json:"worst_1s_drop"`
	P99Drop                float64 `json:"p99_1s_drop"`
	MedianAbsStep          float64 `json:"median_abs_1s_step"`
	UtilAtP5               float64 `json:"util_at_p5"`
	OverAt95PercentOfMean  float64 `json:"over_at_0_95_mean"`
	SubSecondEmptyBinShare float64 `json:"empty_100ms_bin_share"`
}

// Stats computes the §7.3 statistics of t.
func (t *Trace) Stats() Stats {
	bins := t.Bins(time.Second)
	mbit := make([]float64, len(bins))
	for i, b := range bins {
		mbit[i] = b / 1e6
	}
	var s Stats
	s.Bins = len(mbit)
	if len(mbit) == 0 {
		return s
	}
	var sum float64
	for _, v := range mbit {
		sum += v
	}
	s.Mean = sum / float64(len(mbit))
	var sq float64
	for _, v := range mbit {
		d := v - s.Mean
		sq += float64(d * d)
	}
	if s.Mean > 0 {
		s.CV = math.Sqrt(sq/float64(len(mbit))) / s.Mean
	}
	srt := sorted(mbit)
	s.Min, s.Max = srt[0], srt[len(srt)-1]
	s.P5 = Percentile(srt, 5)
	s.P25 = Percentile(srt, 25)
	s.P50 = Percentile(srt, 50)
	s.P75 = Percentile(srt, 75)
	s.P95 = Percentile(srt, 95)

	var outage, util, over float64
	fixed := 0.95 * s.Mean
	for _, v := range mbit {
		if v < OutageShare*s.Mean {
			outage++
		}
		util += math.Min(s.P5, v)
		if fixed > v {
			over++
		}
	}
	n := float64(len(mbit))
	s.OutageFrac = outage / n
	if sum > 0 {
		s.UtilAtP5 = util / sum
	}
	s.OverAt95PercentOfMean = over / n

	gap := make(map[int]bool, len(t.SegmentStarts))
	for _, i := range t.SegmentStarts {
		gap[i] = true
	}
	var drops, steps []float64
	for i := 1; i < len(mbit); i++ {
		if gap[i] && t.Step == time.Second {
			continue
		}
		steps = append(steps, math.Abs(mbit[i]-mbit[i-1]))
		if mbit[i-1] > 0 {
			drops = append(drops, math.Max(0, (mbit[i-1]-mbit[i])/mbit[i-1]))
		}
	}
	if len(drops) > 0 {
		d := sorted(drops)
		s.WorstDrop = d[len(d)-1]
		s.P99Drop = Percentile(d, 99)
	}
	if len(steps) > 0 {
		s.MedianAbsStep = Percentile(sorted(steps), 50)
	}
	if sub := t.Bins(100 * time.Millisecond); len(sub) > 0 {
		var empty float64
		for _, v := range sub {
			if v == 0 {
				empty++
			}
		}
		s.SubSecondEmptyBinShare = empty / float64(len(sub))
	}
	return s
}

// Percentile returns the p-th percentile (0–100) of ascending values with
// linear interpolation between order statistics (the definition used in
// benchmark.md §7.3); 0 for no values.
func Percentile(asc []float64, p float64) float64 { return score.Percentile(asc, p) }

// sum adds v up, in order (the means of the 1-s bins are sum/len).
func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

func sorted(v []float64) []float64 {
	out := append([]float64(nil), v...)
	sort.Float64s(out)
	return out
}
