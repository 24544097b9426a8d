// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"fmt"
	"io"

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

	res     LoadResult
	targets []shape.Reflector
}

// NewBenchReport builds the report of the load test lt, run against ep
// with the result res.
func NewBenchReport(ep speedtest.Endpoint, lt LoadTest, res LoadResult) BenchReport {
	rep := BenchReport{FormatVersion: formatVersion, Server: ep.Name, CongestionControl: res.Congestion,
		Idle:    LatencyReport{jsonMicros(res.idle(p50)), jsonMicros(res.idle(p90))},
		res:     res,
		targets: lt.Targets,
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
	row := func(name, throughput, a, b string) { fmt.Fprintf(w, "%-10s %-33s %-10s %s\n", name, throughput, a, b) }
	row("", "throughput", "p50", "p90")
	row("idle", "", shape.FormatLatency(res.idle(p50)), shape.FormatLatency(res.idle(p90)))
	for _, ph := range []struct {
		name string
		bps  float64
		pl   PhaseLatency
	}{{"download", res.Download.BitsPerSecond, res.DownLatency}, {"upload", res.Upload.BitsPerSecond, res.UpLatency}} {
		row(ph.name, shape.FormatApprox(ph.bps), signedOrDash(ph.pl.Added.P50), signedOrDash(ph.pl.Added.P90))
	}
	row("both", shape.FormatApprox(res.BothDownload.BitsPerSecond)+" down, "+shape.FormatApprox(res.BothUpload.BitsPerSecond)+" up",
		signedOrDash(res.BothLatency.Added.P50), signedOrDash(res.BothLatency.Added.P90))
	fmt.Fprintln(w, "(under load: the latency added, loaded minus idle at the same percentile)")
	rep.Grades.writeText(w, 14)
}
