// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/macake/macake/score"
	"github.com/macake/macake/shape"
)

// Latency summarises one window of probe round-trip times.
type Latency struct {
	// Samples counts the probes answered, Lost those that were not.
	Samples, Lost int
	// P50, P90, P95 and P99 are percentiles of the RTT over every probe
	// sent, a lost one counting as the lost RTT Summarize was given
	// (package score's percentiles; -1 with no probe sent).
	P50, P90, P95, P99 time.Duration
}

// Summarize computes a Latency from the round-trip times of the probes
// answered and the number lost, each lost one counting as an RTT of
// lostRTT.
func Summarize(rtts []time.Duration, lost int, lostRTT time.Duration) Latency {
	d := score.Delays{Lost: lost}
	for _, r := range rtts {
		d.Delivered = append(d.Delivered, score.Ms(r))
	}
	all := d.All(score.Ms(lostRTT))
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return -1
		}
		return time.Duration(score.Percentile(all, p) * float64(time.Millisecond))
	}
	return Latency{Samples: len(rtts), Lost: lost, P50: pct(50), P90: pct(90), P95: pct(95), P99: pct(99)}
}

// LostRTT is the round trip a probe lost under load counts as: the idle
// median plus the lost delay (score.DefaultLostDelay unless the run says
// otherwise), so that it adds the lost delay to the path, like for like.
func LostRTT(idle Latency, lostDelay time.Duration) time.Duration {
	return max(idle.P50, 0) + score.LostOrDefault(lostDelay)
}

// LossPercent is the share of probes that got no reply.
func (l Latency) LossPercent() float64 {
	if l.Samples+l.Lost == 0 {
		return 0
	}
	return 100 * float64(l.Lost) / float64(l.Samples+l.Lost)
}

// Added is the delay a load added, like for like at each percentile:
// loaded p50 − idle p50, loaded p90 − idle p90, and so on
// (reference/benchmark.md §4). Comparing loaded p90 with the idle minimum
// would count ordinary jitter as bloat.
type Added struct {
	// P50, P90, P95 and P99 are loaded minus idle at that percentile.
	P50, P90, P95, P99 time.Duration
}

// AddedDelay returns loaded minus idle at each percentile.
func AddedDelay(idle, loaded Latency) Added {
	return Added{P50: loaded.P50 - idle.P50, P90: loaded.P90 - idle.P90, P95: loaded.P95 - idle.P95, P99: loaded.P99 - idle.P99}
}

// Phase is the outcome of one phase of an off/on/off run.
type Phase struct {
	// Name is e.g. "off", "on: macake watch (autorate)", "off again".
	Name string
	// Shaped is true for a phase with macake shaping.
	Shaped bool
	// Idle and Loaded are the independent probe's windows.
	Idle, Loaded Latency
	// Goodput is the TCP payload rate the download flows received over
	// the loaded window, bit/s; UploadGoodput the upload flows' (0
	// without upload load).
	Goodput, UploadGoodput float64
	// Process is the shaper process's cost during the phase (watch only).
	Process *ProcessCost
	// IdleFrom, IdleTo, LoadFrom and LoadTo bound the idle and loaded
	// windows, so that other probes can be summarised over the same ones.
	IdleFrom, IdleTo, LoadFrom, LoadTo time.Time
	// SeriesAt and SeriesRTT are the loaded window's probes: send time
	// since the load started, and round-trip time (0: lost).
	SeriesAt, SeriesRTT []time.Duration
	// Call is what the call felt in each direction (by shape.Direction)
	// over the loaded window: loss, one-way delay added to the idle
	// window's, jitter.
	Call [2]score.Flow
}

// Added is the phase's added delay, like for like.
func (p Phase) Added() Added { return AddedDelay(p.Idle, p.Loaded) }

// ProcessCost is what a process used over an interval, from /proc.
type ProcessCost struct {
	// CPU is user + system time used; Wall the interval.
	CPU, Wall time.Duration
	// RSS is the resident set at the end, MaxRSS its peak (VmHWM), bytes.
	RSS, MaxRSS int64
}

// CPUPercent is CPU time over wall time, in percent of one core.
func (c ProcessCost) CPUPercent() float64 {
	if c.Wall <= 0 {
		return 0
	}
	return 100 * c.CPU.Seconds() / c.Wall.Seconds()
}

// Run is one drift-controlled off/on/off measurement on one trace segment.
type Run struct {
	// Trace is the segment every phase replayed.
	Trace Trace
	// Phases in the order run: off, on, off again, then any reference
	// rows (e.g. a fixed-rate shaper).
	Phases []Phase
}

// Verdict compares the shaped phase named on with the mean of the
// unshaped phases: the share of their goodput it kept and its added p90
// as a share of theirs.
type Verdict struct {
	// OffGoodput and OffAdded average the unshaped phases; OnGoodput and
	// OnAdded are the shaped phase's.
	OffGoodput, OnGoodput float64
	OffAdded, OnAdded     Added
	// GoodputKept is OnGoodput/OffGoodput; P90Ratio is on/off added p90.
	GoodputKept, P90Ratio float64
	// P50Cut and P90Cut are the fractions of the unshaped added delay
	// removed.
	P50Cut, P90Cut float64
	// OffPower and OnPower are goodput (Mbit/s) per ms of added p90.
	OffPower, OnPower float64
	// OnLossPct and OffLossPct are the probe loss in percent.
	OnLossPct, OffLossPct float64
	// DriftGoodput (bit/s) and DriftP50 (ms) are "off again" minus "off".
	DriftGoodput, DriftP50 float64
	// OffPhases counts the unshaped phases.
	OffPhases int
}

// Compare returns the verdict for the phase called on against every
// unshaped phase of r.
func (r Run) Compare(on string) (Verdict, error) {
	var v Verdict
	var offs []Phase
	var shaped *Phase
	for i, p := range r.Phases {
		switch {
		case !p.Shaped:
			offs = append(offs, p)
		case p.Name == on:
			shaped = &r.Phases[i]
		}
	}
	if len(offs) == 0 || shaped == nil {
		return v, fmt.Errorf("need unshaped phases and the phase %q", on)
	}
	for _, p := range offs {
		a := p.Added()
		v.OffGoodput += p.Goodput / float64(len(offs))
		v.OffAdded.P50 += a.P50 / time.Duration(len(offs))
		v.OffAdded.P90 += a.P90 / time.Duration(len(offs))
		v.OffAdded.P99 += a.P99 / time.Duration(len(offs))
		v.OffLossPct += p.Loaded.LossPercent() / float64(len(offs))
	}
	if len(offs) >= 2 {
		v.DriftGoodput = offs[len(offs)-1].Goodput - offs[0].Goodput
		v.DriftP50 = float64(offs[len(offs)-1].Added().P50-offs[0].Added().P50) / float64(time.Millisecond)
	}
	v.OnGoodput, v.OnAdded, v.OnLossPct = shaped.Goodput, shaped.Added(), shaped.Loaded.LossPercent()
	if v.OffGoodput > 0 {
		v.GoodputKept = v.OnGoodput / v.OffGoodput
	}
	if v.OffAdded.P90 > 0 {
		v.P90Ratio = float64(v.OnAdded.P90) / float64(v.OffAdded.P90)
		v.P90Cut = 1 - v.P90Ratio
	}
	if v.OffAdded.P50 > 0 {
		v.P50Cut = 1 - float64(v.OnAdded.P50)/float64(v.OffAdded.P50)
	}
	v.OffPower = power(v.OffGoodput, v.OffAdded.P90)
	v.OnPower = power(v.OnGoodput, v.OnAdded.P90)
	v.OffPhases = len(offs)
	return v, nil
}

// power is Kleinrock-style: Mbit/s per ms of added p90 (the delay floored
// at 1 ms so an unloaded link does not divide by zero).
func power(goodput float64, added time.Duration) float64 {
	ms := max(float64(added)/float64(time.Millisecond), 1)
	return goodput / 1e6 / ms
}

// WriteTable prints the run as a Markdown table, like for like at each
// percentile, in the layout of reference/benchmark.md §2.1, followed by the
// verdict for the phase on (when not "").
func (r Run) WriteTable(w io.Writer, on string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s, %s: capacity down %s (min %s, max %s), up %s\n\n", r.Trace.Name, r.Trace.Length,
		mbit(float64(r.Trace.Mean(true))), mbit(float64(r.Trace.Min(true))), mbit(float64(r.Trace.Max(true))), mbit(float64(r.Trace.Mean(false))))
	upload := false
	for _, p := range r.Phases {
		upload = upload || p.UploadGoodput > 0
	}
	up := func(p Phase) string { return "" }
	if upload {
		b.WriteString("| phase | goodput down | goodput up | added p50 | added p90 | added p99 | ping loss | idle p50 / p90 |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|\n")
		up = func(p Phase) string { return " " + mbit(p.UploadGoodput) + " |" }
	} else {
		b.WriteString("| phase | goodput down | added p50 | added p90 | added p99 | ping loss | idle p50 / p90 |\n")
		b.WriteString("|---|---|---|---|---|---|---|\n")
	}
	for _, p := range r.Phases {
		a := p.Added()
		fmt.Fprintf(&b, "| %s | %s |%s %s | %s | %s | %.1f %% | %s / %s |\n", p.Name, mbit(p.Goodput), up(p),
			ms(a.P50), ms(a.P90), ms(a.P99), p.Loaded.LossPercent(), msAbs(p.Idle.P50), msAbs(p.Idle.P90))
	}
	b.WriteString("\nThe call beside the load (one-way delay added to the idle window's, ms; a lost packet counts as the lost delay):\n\n")
	b.WriteString("| phase | ↓ loss | ↓ p50 | ↓ p90 | ↓ p99 | ↓ jitter | ↑ loss | ↑ p50 | ↑ p90 | ↑ p99 | ↑ jitter |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "| %s |", p.Name)
		for _, d := range []shape.Direction{shape.Download, shape.Upload} {
			c := p.Call[d]
			fmt.Fprintf(&b, " %.1f %% | %s | %s | %s | %.1f |", 100*c.Loss, msf(c.P50), msf(c.P90), msf(c.P99), c.Jitter)
		}
		b.WriteString("\n")
	}
	for _, p := range r.Phases {
		if p.Process != nil {
			c := p.Process
			fmt.Fprintf(&b, "\n%s: the macake process used %.2f %% of one core (%s CPU in %s), resident %.1f MB (peak %.1f MB)\n",
				p.Name, c.CPUPercent(), c.CPU.Round(time.Millisecond), c.Wall.Round(100*time.Millisecond), float64(c.RSS)/(1<<20), float64(c.MaxRSS)/(1<<20))
		}
	}
	if on != "" {
		v, err := r.Compare(on)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "\nThe unshaped phases average %s, %s median and %s p90 added delay (drift between them: %+.2f Mbit/s, %+.1f ms median).\n",
			mbit(v.OffGoodput), ms(v.OffAdded.P50), ms(v.OffAdded.P90), v.DriftGoodput/1e6, v.DriftP50)
		fmt.Fprintf(&b, "%q kept %.1f %% of the goodput and cut the median added delay by %.0f %% and the p90 by %.0f %%; power (goodput / added p90) %.2f → %.2f Mbit/s per ms.\n",
			on, 100*v.GoodputKept, 100*v.P50Cut, 100*v.P90Cut, v.OffPower, v.OnPower)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mbit(bits float64) string { return fmt.Sprintf("%.2f Mbit/s", bits/1e6) }

func ms(d time.Duration) string {
	return fmt.Sprintf("%+.1f ms", float64(d)/float64(time.Millisecond))
}

func msAbs(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
