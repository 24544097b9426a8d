// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"cmp"
	"encoding/json"
	"slices"
	"sort"
	"time"

	"github.com/macake/macake/score"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim/trace"
)

// Result is what one run measured.
type Result struct {
	// Controller is the arm's name (set by RunAll).
	Controller string        `json:"controller"`
	Link       string        `json:"link"`
	Class      string        `json:"class"`
	Seed       uint64        `json:"seed"`
	Offset     time.Duration `json:"offset_ns"`
	Duration   time.Duration `json:"duration_ns"`
	// Measured is the stretch the metrics cover: the whole 100 ms bins
	// after the warm-up.
	Measured time.Duration `json:"measured_ns"`
	// LostDelay is what a lost probe or call packet counted as in the
	// percentiles; CallInterval the call's packet period (negative: no
	// call).
	LostDelay    time.Duration `json:"lost_delay_ns"`
	CallInterval time.Duration `json:"call_interval_ns"`
	// Dir holds the per-direction metrics, indexed by shape.Direction.
	Dir [2]DirResult `json:"-"`
	// Upload and Download repeat Dir for JSON.
	Upload   *DirResult `json:"upload"`
	Download *DirResult `json:"download"`
	// RTT50 … RTT99 are the added round-trip delay (both legs, as a
	// ping sees it) over the loaded intervals, ms, taken over every
	// measurement probe sent after the warm-up, one that did not come
	// back (either leg) counting as Options.LostDelay; meaningless (null
	// in JSON) when RTTSamples is 0. RTTLoss is the share that did not
	// come back.
	RTT50      float64 `json:"rtt_added_p50_ms"`
	RTT90      float64 `json:"rtt_added_p90_ms"`
	RTT95      float64 `json:"rtt_added_p95_ms"`
	RTT99      float64 `json:"rtt_added_p99_ms"`
	RTTSamples int     `json:"rtt_samples"`
	RTTLoss    float64 `json:"rtt_probe_loss"`
	// Phases, for off/on/off runs, has one entry per phase.
	Phases []Phase `json:"phases,omitempty"`
	// Series is the per-100-ms time series, when asked for.
	Series *Series `json:"series,omitempty"`
}

// DirResult are the metrics of one direction (benchmark.md §4.1). Delays
// are added one-way delays from the measurement probe against the model's
// true base delay, in ms, over the loaded intervals (after the warm-up).
// The percentiles are over every probe sent on this direction's leg, a
// lost one counting as Options.LostDelay (package score), and ProbeLoss is
// printed beside them. With no probe measured (DelaySamples 0: none
// arrived or was lost, e.g. all still queued) the delays and the score mean
// nothing: they are 0 here, null in JSON and "—" in tables.
type DirResult struct {
	// Loaded is set when the direction carried bulk flows; U, Score and
	// the recovery times only mean something then.
	Loaded bool `json:"loaded"`
	// U is the bits the bottleneck served / its capacity bits over the
	// loaded intervals (whole 100 ms bins after the warm-up), each counted
	// in the bin it was served, so U ≤ 1; bits the download pipe drops
	// after the bottleneck do not count (they never reach the user).
	U float64 `json:"u"`
	// Goodput is the flows' unique payload delivered, Mbit/s.
	Goodput float64 `json:"goodput_mbit"`
	// Capacity is the mean capacity over the loaded intervals, Mbit/s.
	Capacity float64 `json:"capacity_mbit"`
	// MeanRate is the mean pipe rate, Mbit/s (0 when unshaped).
	MeanRate float64 `json:"mean_rate_mbit"`
	D50      float64 `json:"d50_ms"`
	D95      float64 `json:"d95_ms"`
	D99      float64 `json:"d99_ms"`
	Score    float64 `json:"score"`
	// ScoreSurvivors is the score as the project computed it before issue
	// 24, from the D95 of the probes that came back only: kept to compare
	// with tables made then, never to decide (0 when none came back).
	ScoreSurvivors float64 `json:"score_survivors_only"`
	// DelaySamples is how many measurement probes the delays are over:
	// those that arrived and those lost.
	DelaySamples int `json:"delay_samples"`
	// RecoverDrop is the time until added delay is back below 20 ms after
	// each ≥ 30 % capacity drop within 1 s; RecoverRise the time until the
	// pipe rate reaches 0.8·C after each ≥ 30 % rise. Median and p90 in s;
	// Events counts the events, Unrecovered those that never recovered.
	RecoverDrop Recovery `json:"recover_drop"`
	RecoverRise Recovery `json:"recover_rise"`
	// B100 is seconds per minute with added delay above 100 ms.
	B100 float64 `json:"b100_s_per_min"`
	// RateChanges is applied pipe-rate changes per minute.
	RateChanges float64 `json:"rate_changes_per_min"`
	// BottleneckLoss and PipeLoss are the shares of packets dropped there.
	BottleneckLoss float64 `json:"bottleneck_loss"`
	PipeLoss       float64 `json:"pipe_loss"`
	// ProbeLoss is the share of the measurement probes on this
	// direction's leg, after the warm-up, that a queue or the link dropped
	// (probes still in flight when the run ends are left out).
	ProbeLoss float64 `json:"probe_loss"`
	// Call is what the interactive call's packets in this direction felt
	// after the warm-up: loss, one-way delay added to the true base delay
	// (percentiles over every packet sent, a lost one counting as
	// Options.LostDelay) and jitter (zero without a call).
	Call score.Flow `json:"call"`
	// Retransmits and Timeouts of the direction's flows.
	Retransmits int64 `json:"retransmits"`
	Timeouts    int64 `json:"timeouts"`
}

// MarshalJSON writes the delays and the score as null when no probe
// measured them.
func (d DirResult) MarshalJSON() ([]byte, error) {
	type plain DirResult
	out := struct {
		plain
		D50   *float64 `json:"d50_ms"`
		D95   *float64 `json:"d95_ms"`
		D99   *float64 `json:"d99_ms"`
		Score *float64 `json:"score"`
	}{plain: plain(d)}
	if d.DelaySamples > 0 {
		out.D50, out.D95, out.D99 = &d.D50, &d.D95, &d.D99
		if d.Loaded {
			out.Score = &d.Score
		}
	}
	return json.Marshal(out)
}

// MarshalJSON writes the added round-trip percentiles as null when no probe
// measured them.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	out := struct {
		plain
		RTT50 *float64 `json:"rtt_added_p50_ms"`
		RTT90 *float64 `json:"rtt_added_p90_ms"`
		RTT95 *float64 `json:"rtt_added_p95_ms"`
		RTT99 *float64 `json:"rtt_added_p99_ms"`
	}{plain: plain(r)}
	if r.RTTSamples > 0 {
		out.RTT50, out.RTT90, out.RTT95, out.RTT99 = &r.RTT50, &r.RTT90, &r.RTT95, &r.RTT99
	}
	return json.Marshal(out)
}

// Recovery summarises recovery times over events.
type Recovery struct {
	Events      int     `json:"events"`
	Unrecovered int     `json:"unrecovered"`
	Median      float64 `json:"median_s"`
	P90         float64 `json:"p90_s"`
}

// Phase is one phase of an off/on/off run.
type Phase struct {
	Name string `json:"name"`
	// Goodput is the loaded directions' payload throughput, Mbit/s.
	Goodput [2]float64 `json:"goodput_mbit"`
	// RTT50 and RTT90 are the added round-trip delay percentiles, ms,
	// over Samples probes, a lost one counting as Options.LostDelay (0:
	// no probe measured; the percentiles are 0).
	RTT50   float64 `json:"rtt_added_p50_ms"`
	RTT90   float64 `json:"rtt_added_p90_ms"`
	Samples int     `json:"rtt_samples"`
}

// Series is a run's time series in 100 ms bins, for plots. Rates in bit/s,
// delays in ms (−1 where no probe came back).
type Series struct {
	Bin      time.Duration `json:"bin_ns"`
	Capacity [2][]float64  `json:"capacity"`
	Rate     [2][]float64  `json:"rate"`
	Through  [2][]float64  `json:"throughput"`
	Delay    [2][]float64  `json:"added_delay_p50"`
	DelayMax [2][]float64  `json:"added_delay_max"`
}

type probeSample struct {
	t     int64
	added int64
}

// lostProbe is a measurement probe dropped on a leg: t keys it as the
// leg's samples are keyed (sent for the upward leg, at the far end for the
// downward), sent is when it left the Mac.
type lostProbe struct{ t, sent int64 }

// recorder collects what the metrics need while a run goes.
type recorder struct {
	nbins     int
	capBits   [2][]int64
	linkBits  [2][]int64 // bits the bottleneck served, by bin, less those a pipe then dropped
	delivered [2][]int64
	goodSegs  [2][]int64
	rate      [2][]int64
	curRate   [2]int64
	changes   [2]int
	lastGood  [2]int64

	samples  [2][]probeSample
	rtt      []probeSample
	measures int32
	// lost holds the measurement probes dropped on each direction's leg.
	lost [2][]lostProbe
	// calls and callLost are the call's packets that arrived (keyed by
	// send time) and the send times of those dropped, per direction.
	calls    [2][]probeSample
	callLost [2][]int64
}

func newRecorder(e *engine) *recorder {
	r := &recorder{}
	r.nbins = int((e.opt.Duration + binWidth - 1) / binWidth)
	for _, d := range shape.Directions {
		r.capBits[d] = capacityBins(e.link.Capacity[d], e.opt.Offset, e.opt.Duration, binWidth)
		r.delivered[d] = make([]int64, r.nbins)
		r.linkBits[d] = make([]int64, r.nbins)
		r.goodSegs[d] = make([]int64, r.nbins)
		r.rate[d] = make([]int64, r.nbins)
	}
	n := int(e.opt.Duration / e.opt.MeasureInterval)
	r.samples[0] = make([]probeSample, 0, n)
	r.samples[1] = make([]probeSample, 0, n)
	r.rtt = make([]probeSample, 0, n)
	return r
}

func (r *recorder) deliver(d shape.Direction, now int64, size int32) {
	b := int(now / int64(binWidth))
	if b < r.nbins {
		r.delivered[d][b] += int64(size) * 8
	}
}

// served counts the bytes one delivery opportunity of the bottleneck
// carried, in its bin: never more than the bin's capacity.
func (r *recorder) served(d shape.Direction, now int64, bytes int32) {
	if b := int(now / int64(binWidth)); b < r.nbins {
		r.linkBits[d][b] += int64(bytes) * 8
	}
}

// unserved takes back a packet the bottleneck carried that a pipe after it
// dropped (the download pipe): it never reached the user.
func (r *recorder) unserved(d shape.Direction, p packet) {
	if b := int(p.served / int64(binWidth)); b < r.nbins {
		r.linkBits[d][b] -= int64(p.size) * 8
	}
}

// dropped notes a packet lost on direction d's leg; only measurement
// probes and the call's packets matter.
func (r *recorder) dropped(d shape.Direction, p packet) {
	switch p.kind {
	case kindMeasure:
		t := p.sent
		if d == shape.Download {
			t = p.echo
		}
		r.lost[d] = append(r.lost[d], lostProbe{t, p.sent})
	case kindCall:
		r.callLost[d] = append(r.callLost[d], p.sent)
	}
}

// callArrived notes a call packet at the end of direction d's leg.
func (r *recorder) callArrived(d shape.Direction, p packet, now int64) {
	r.calls[d] = append(r.calls[d], probeSample{p.sent, now - p.sent - p.base})
}

func (r *recorder) measureSent() int32 {
	r.measures++
	return r.measures
}

func (r *recorder) measureUp(sent, added int64) {
	r.samples[shape.Upload] = append(r.samples[shape.Upload], probeSample{sent, added})
}

func (r *recorder) measureDown(p packet, now int64) {
	down := now - p.echo - p.base
	r.samples[shape.Download] = append(r.samples[shape.Download], probeSample{p.echo, down})
	r.rtt = append(r.rtt, probeSample{p.sent, p.aux + down})
}

func (r *recorder) rateChanged(d shape.Direction, rate int64) {
	r.curRate[d] = rate
	r.changes[d]++
}

// tick closes a bin every 100 ms.
func (r *recorder) tick(e *engine) {
	if (e.now+int64(time.Millisecond))%int64(binWidth) != 0 {
		return
	}
	b := int(e.now / int64(binWidth))
	if b >= r.nbins {
		return
	}
	for _, d := range shape.Directions {
		r.rate[d][b] = r.curRate[d]
		var segs int64
		for _, f := range e.flows {
			if f.dir == d {
				segs += f.rcv.delivered
			}
		}
		r.goodSegs[d][b] = segs - r.lastGood[d]
		r.lastGood[d] = segs
	}
}

// result computes the metrics of a finished run.
func (r *recorder) result(e *engine) *Result {
	res := &Result{
		Link: e.link.Name, Class: e.link.Class, Seed: e.opt.Seed,
		Offset: e.opt.Offset, Duration: e.opt.Duration, LostDelay: e.opt.LostDelay, CallInterval: e.opt.CallInterval,
	}
	warm := int64(e.opt.Warmup)
	lostMs := score.Ms(e.opt.LostDelay)
	// Whole bins only: the first that starts after the warm-up, the last
	// that ends by the end of the run.
	firstBin := int((warm + int64(binWidth) - 1) / int64(binWidth))
	lastBin := int(e.opt.Duration / binWidth)
	res.Measured = time.Duration(lastBin-firstBin) * binWidth
	for _, d := range shape.Directions {
		dr := &res.Dir[d]
		dr.Loaded = e.opt.Flows[d] > 0
		var capBits, linkBits, good, rateSum float64
		bins := 0
		for b := firstBin; b < lastBin; b++ {
			capBits += float64(r.capBits[d][b])
			linkBits += float64(r.linkBits[d][b])
			good += float64(r.goodSegs[d][b])
			rateSum += float64(r.rate[d][b])
			bins++
		}
		secs := float64(bins) * binWidth.Seconds()
		if capBits > 0 {
			dr.U = linkBits / capBits
		}
		if secs > 0 {
			dr.Goodput = float64(good*mssBytes*8) / secs / 1e6
			dr.Capacity = capBits / secs / 1e6
			dr.MeanRate = rateSum / float64(bins) / 1e6
		}
		probes := window(r.samples[d], lostTimes(r.lost[d]), warm)
		added := probes.All(lostMs)
		dr.DelaySamples = len(added)
		dr.ProbeLoss = probes.Loss()
		if len(added) > 0 {
			dr.D50 = score.Percentile(added, 50)
			dr.D95 = score.Percentile(added, 95)
			dr.D99 = score.Percentile(added, 99)
			if dr.Loaded {
				dr.Score = score.Score(dr.U, msDuration(dr.D95))
				if survivors := slices.Sorted(slices.Values(probes.Delivered)); len(survivors) > 0 {
					dr.ScoreSurvivors = score.Score(dr.U, msDuration(score.Percentile(survivors, 95)))
				}
			}
		}
		var over float64
		for _, a := range added {
			if a > 100 {
				over++
			}
		}
		if len(added) > 0 {
			dr.B100 = over / float64(len(added)) * 60
		}
		dr.Call = score.FlowOf(window(r.calls[d], r.callLost[d], warm), e.opt.LostDelay)
		minutes := e.opt.Duration.Minutes()
		dr.RateChanges = float64(r.changes[d]) / minutes
		var sent, retx, tos int64
		for _, f := range e.flows {
			if f.dir == d {
				sent += int64(f.snd.sndNxt) + f.snd.retransmits
				retx += f.snd.retransmits
				tos += f.snd.timeouts
			}
		}
		dr.Retransmits, dr.Timeouts = retx, tos
		if sent > 0 {
			dr.BottleneckLoss = float64(e.bns[d].drops+e.bns[d].lost) / float64(sent)
			dr.PipeLoss = float64(e.pipes[d].drops) / float64(sent)
		}
		if dr.Loaded {
			dr.RecoverDrop, dr.RecoverRise = r.recoveries(e, d)
		}
	}
	rtt := r.rttWindow(warm, int64(e.opt.Duration))
	all := rtt.All(lostMs)
	res.RTTSamples = len(all)
	res.RTTLoss = rtt.Loss()
	if len(all) > 0 {
		res.RTT50 = score.Percentile(all, 50)
		res.RTT90 = score.Percentile(all, 90)
		res.RTT95 = score.Percentile(all, 95)
		res.RTT99 = score.Percentile(all, 99)
	}
	res.Upload, res.Download = &res.Dir[shape.Upload], &res.Dir[shape.Download]
	if ph := e.opt.Phases; ph[1] != 0 {
		res.Phases = r.phases(e)
	}
	if e.opt.Series {
		res.Series = r.series()
	}
	return res
}

// window returns the packets of one leg keyed from from on: the added
// delays (ms) of those that arrived, in the order they were sent, and how
// many of those dropped (lost, their keys) were.
func window(s []probeSample, lost []int64, from int64) score.Delays {
	in := make([]probeSample, 0, len(s))
	for _, p := range s {
		if p.t >= from {
			in = append(in, p)
		}
	}
	slices.SortStableFunc(in, func(a, b probeSample) int { return cmp.Compare(a.t, b.t) })
	d := score.Delays{Delivered: make([]float64, len(in))}
	for i, p := range in {
		d.Delivered[i] = float64(p.added) / 1e6
	}
	for _, t := range lost {
		if t >= from {
			d.Lost++
		}
	}
	return d
}

// lostTimes are the keys of lost probes.
func lostTimes(l []lostProbe) []int64 {
	out := make([]int64, len(l))
	for i, p := range l {
		out[i] = p.t
	}
	return out
}

// rttWindow is the round trips of the measurement probes sent in [from,
// to): those that came back, and those lost on either leg.
func (r *recorder) rttWindow(from, to int64) score.Delays {
	var d score.Delays
	for _, p := range r.rtt {
		if p.t >= from && p.t < to {
			d.Delivered = append(d.Delivered, float64(p.added)/1e6)
		}
	}
	for _, l := range r.lost {
		for _, p := range l {
			if p.sent >= from && p.sent < to {
				d.Lost++
			}
		}
	}
	return d
}

// honestSamples are leg d's probes with the lost ones in place, each
// counting as lost (ns), in time order: what the recovery times follow.
func (r *recorder) honestSamples(d shape.Direction, lost int64) []probeSample {
	out := slices.Clone(r.samples[d])
	for _, p := range r.lost[d] {
		out = append(out, probeSample{p.t, lost})
	}
	slices.SortStableFunc(out, func(a, b probeSample) int { return cmp.Compare(a.t, b.t) })
	return out
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// recoveries finds the ≥ 30 % capacity drops and rises between 1-s bins and
// measures the recovery after each.
func (r *recorder) recoveries(e *engine, d shape.Direction) (drop, rise Recovery) {
	per := int(time.Second / binWidth)
	secs := r.nbins / per
	cap1s := make([]float64, secs)
	for s := range secs {
		for b := s * per; b < (s+1)*per; b++ {
			cap1s[s] += float64(r.capBits[d][b])
		}
	}
	samples := r.honestSamples(d, int64(e.opt.LostDelay))
	end := int64(e.opt.Duration)
	var drops, rises []float64
	for s := 1; s < secs; s++ {
		t0 := int64(s) * int64(time.Second)
		if t0 < int64(e.opt.Warmup) || cap1s[s-1] <= 0 {
			continue
		}
		switch {
		case cap1s[s] <= 0.7*cap1s[s-1]:
			drop.Events++
			if t, ok := delayRecovery(samples, t0, end); ok {
				drops = append(drops, t)
			} else {
				drop.Unrecovered++
			}
		case cap1s[s] >= 1.3*cap1s[s-1]:
			rise.Events++
			target := 0.8 * cap1s[s]
			found := false
			for b := s * per; b < r.nbins; b++ {
				if rt := r.rate[d][b]; rt == 0 || float64(rt) >= target {
					rises = append(rises, float64(int64(b)*int64(binWidth)-t0)/1e9)
					found = true
					break
				}
			}
			if !found {
				rise.Unrecovered++
			}
		}
	}
	summarise := func(rec *Recovery, v []float64) {
		sort.Float64s(v)
		rec.Median = trace.Percentile(v, 50)
		rec.P90 = trace.Percentile(v, 90)
	}
	summarise(&drop, drops)
	summarise(&rise, rises)
	return drop, rise
}

// delayRecovery returns the time from t0 until the added delay stays below
// 20 ms for 500 ms.
func delayRecovery(s []probeSample, t0, end int64) (float64, bool) {
	const hold = int64(500 * time.Millisecond)
	const limit = int64(20 * time.Millisecond)
	i := sort.Search(len(s), func(i int) bool { return s[i].t >= t0 })
	start := int64(-1)
	for ; i < len(s); i++ {
		if s[i].added >= limit {
			start = -1
			continue
		}
		if start < 0 {
			start = s[i].t
		}
		if s[i].t-start >= hold {
			return float64(start-t0) / 1e9, true
		}
	}
	if start >= 0 && end-start >= hold {
		return float64(start-t0) / 1e9, true
	}
	return 0, false
}

func (r *recorder) phases(e *engine) []Phase {
	ph := e.opt.Phases
	bounds := [4]int64{int64(e.opt.Warmup), int64(ph[0]), int64(ph[1]), int64(e.opt.Duration)}
	names := [3]string{"off", "on", "off again"}
	out := make([]Phase, 3)
	for i := range 3 {
		from, to := bounds[i], bounds[i+1]
		out[i].Name = names[i]
		rtt := r.rttWindow(from, to).All(score.Ms(e.opt.LostDelay))
		out[i].Samples = len(rtt)
		if len(rtt) > 0 {
			out[i].RTT50 = score.Percentile(rtt, 50)
			out[i].RTT90 = score.Percentile(rtt, 90)
		}
		for _, d := range shape.Directions {
			var segs int64
			b0, b1 := int(from/int64(binWidth)), int(to/int64(binWidth))
			for b := b0; b < b1 && b < r.nbins; b++ {
				segs += r.goodSegs[d][b]
			}
			if secs := float64(to-from) / 1e9; secs > 0 {
				out[i].Goodput[d] = float64(segs*mssBytes*8) / secs / 1e6
			}
		}
	}
	return out
}

func (r *recorder) series() *Series {
	s := &Series{Bin: binWidth}
	scale := float64(time.Second / binWidth)
	for _, d := range shape.Directions {
		s.Capacity[d] = make([]float64, r.nbins)
		s.Rate[d] = make([]float64, r.nbins)
		s.Through[d] = make([]float64, r.nbins)
		s.Delay[d] = make([]float64, r.nbins)
		s.DelayMax[d] = make([]float64, r.nbins)
		for b := range r.nbins {
			s.Capacity[d][b] = float64(r.capBits[d][b]) * scale
			s.Rate[d][b] = float64(r.rate[d][b])
			s.Through[d][b] = float64(r.delivered[d][b]) * scale
		}
		byBin := make([][]float64, r.nbins)
		for _, p := range r.samples[d] {
			b := int(p.t / int64(binWidth))
			if b < r.nbins {
				byBin[b] = append(byBin[b], float64(p.added)/1e6)
			}
		}
		for b, v := range byBin {
			if len(v) == 0 {
				s.Delay[d][b], s.DelayMax[d][b] = -1, -1
				continue
			}
			sort.Float64s(v)
			s.Delay[d][b] = trace.Percentile(v, 50)
			s.DelayMax[d][b] = v[len(v)-1]
		}
	}
	return s
}
