// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/shape"
)

// BenchReport is macake bench's result: the throughput and the latency the
// load added, without the link's identity or a verdict, for comparing runs
// before and after a change.
type BenchReport struct {
	FormatVersion     string        `json:"format_version"`
	Server            string        `json:"server"`
	LatencyTargets    []string      `json:"latency_targets"`
	CongestionControl string        `json:"congestion_control,omitempty"`
	Idle              LatencyReport `json:"idle"`
	Download          PhaseReport   `json:"download"`
	Upload            PhaseReport   `json:"upload"`
	Both              BothReport    `json:"both"`
	Grades            Grades        `json:"grades"`

	res       LoadResult
	targets   []shape.Reflector
	lostDelay time.Duration
}

// NewBenchReport builds the report of the load test lt, run against ep
// with the result res.
func NewBenchReport(ep speedtest.Endpoint, lt LoadTest, res LoadResult) BenchReport {
	rep := BenchReport{FormatVersion: formatVersion, Server: ep.Name, CongestionControl: res.Congestion,
		Idle:      LatencyReport{jsonMicros(res.idle(p50)), jsonMicros(res.idle(p90))},
		res:       res,
		targets:   lt.Targets,
		lostDelay: lt.LostDelay,
	}
	for _, t := range lt.Targets {
		rep.LatencyTargets = append(rep.LatencyTargets, t.String())
	}
	rep.Download, rep.Upload = phaseReport(res.Download, res.DownLatency), phaseReport(res.Upload, res.UpLatency)
	rep.Both, rep.Grades = bothReport(res), NewGrades(res)
	return rep
}

// WriteText writes the report for people.
func (rep BenchReport) WriteText(w io.Writer) {
	res := rep.res
	fmt.Fprintf(w, "bench against %s; latency to %s (not exempt from shaping)\n", rep.Server, DescribeTargets(rep.targets))
	row := func(name, throughput, a, b, lost string) {
		fmt.Fprintf(w, "%s\n", strings.TrimRight(fmt.Sprintf("%-10s %-33s %-10s %-10s %s", name, throughput, a, b, lost), " "))
	}
	row("", "throughput", "p50", "p90", "lost")
	row("idle", "", shape.FormatLatency(res.idle(p50)), shape.FormatLatency(res.idle(p90)), "")
	for _, ph := range []struct {
		name string
		bps  float64
		pl   PhaseLatency
	}{{"download", res.Download.BitsPerSecond, res.DownLatency}, {"upload", res.Upload.BitsPerSecond, res.UpLatency}} {
		row(ph.name, shape.FormatApprox(ph.bps), signedOrDash(ph.pl.Added.P50), signedOrDash(ph.pl.Added.P90), lossPercent(ph.pl))
	}
	row("both", shape.FormatApprox(res.BothDownload.BitsPerSecond)+" down, "+shape.FormatApprox(res.BothUpload.BitsPerSecond)+" up",
		signedOrDash(res.BothLatency.Added.P50), signedOrDash(res.BothLatency.Added.P90), lossPercent(res.BothLatency))
	if rep.lostDelay > 0 {
		fmt.Fprintln(w, "(under load: the latency added, loaded minus idle at the same percentile, over every probe sent, a lost one")
		fmt.Fprintf(w, " counting as %v more than idle; lost: the probes under that load that got no reply)\n", rep.lostDelay)
	} else {
		fmt.Fprintln(w, "(under load: the latency added, loaded minus idle at the same percentile, over the replies; lost: the probes")
		fmt.Fprintln(w, " under that load that got no reply)")
	}
	rep.Grades.writeText(w, 14)
}

// lossPercent prints a window's probe loss, "-" without probes.
func lossPercent(pl PhaseLatency) string {
	if pl.Sent == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*pl.Loss())
}
