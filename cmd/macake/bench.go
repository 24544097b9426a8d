// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/macake/macake/sense/measure"
)

var benchCmd = &command{
	name:  "bench",
	args:  "[--json] [--server URL] [--duration D] [--reflector ADDR ...]",
	short: "One-shot throughput and latency under load, for A/B comparisons.",
	long: `Runs an idle phase, then a download and an upload that saturate the link,
and reports the throughput of each and the latency the load added, like for
like at each percentile (loaded p50 minus idle p50, loaded p90 minus idle
p90). Run it before and after a change (a policy, a rate, shaping on or off)
and compare.

Latency is measured to the speed-test server's own address, which macake's
pf rules do not exempt from shaping (unlike the controller's reflectors), so
the result includes every delay the shaper adds. --reflector adds targets.
Nothing is saved.

Endpoints: Cloudflare's public speed test by default; --server URL for a
server started with "macake measure --serve ADDR".`,
}

func init() { benchCmd.run = runBench }

// benchReport is bench's JSON document.
type benchReport struct {
	FormatVersion     string      `json:"format_version"`
	Server            string      `json:"server"`
	LatencyTargets    []string    `json:"latency_targets"`
	CongestionControl string      `json:"congestion_control,omitempty"`
	Idle              latencyJSON `json:"idle"`
	Download          phaseJSON   `json:"download"`
	Upload            phaseJSON   `json:"upload"`
}

func runBench(e *env, args []string) int {
	fs := benchCmd.flags()
	asJSON := fs.Bool("json", false, "print the result as one JSON document")
	server := fs.String("server", "", "speed-test server `URL` (started with macake measure --serve); default: speed.cloudflare.com")
	var duration, idle time.Duration
	durationVar(fs, &duration, "duration", 10*time.Second, "length of the download and of the upload phase")
	durationVar(fs, &idle, "idle", 3*time.Second, "length of the idle phase")
	streams := fs.Int("streams", 8, "parallel connections per direction")
	var extra addrList
	fs.Var(&extra, "reflector", "also measure latency to `ADDR` (repeatable)")
	if done, code := benchCmd.parse(e, fs, args); done {
		return code
	}
	if done, code := benchCmd.noArgs(e, fs); done {
		return code
	}
	if duration < 2*time.Second || idle < time.Second || *streams < 1 || *streams > 64 {
		fmt.Fprintln(e.stderr, "macake bench: --duration must be at least 2s, --idle at least 1s, --streams 1 to 64")
		return exitUsage
	}
	ep, targets, err := chooseEndpoint(e.ctx, *server, nil)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake bench: %v\n", err)
		return exitFailure
	}
	if *server == "" {
		// The public endpoint's own address is the non-exempt target.
		if host, err := resolveHost(e.ctx, ep.Host()); err == nil {
			targets = append(targets, host)
		}
	}
	for _, a := range extra {
		if !contains(targets, a) {
			targets = append(targets, a)
		}
	}
	if len(targets) == 0 {
		fmt.Fprintf(e.stderr, "macake bench: cannot resolve %s for latency; pass --reflector ADDR\n", ep.Host())
		return exitFailure
	}
	lt := loadTest{
		Endpoint: ep, Streams: *streams, Idle: idle, Duration: duration, Targets: targets,
		ProbeInterval: 100 * time.Millisecond, Progress: e.stderr, TTY: isTerminal(e.stderr), Command: "bench",
	}
	res, err := lt.run(e.ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake bench: %v\n", err)
		return exitFailure
	}
	rep := benchReport{FormatVersion: measureFormatVersion, Server: ep.Name, CongestionControl: res.Congestion,
		Idle: latencyJSON{jsonMicros(res.idle(p50)), jsonMicros(res.idle(p90))}}
	for _, t := range targets {
		rep.LatencyTargets = append(rep.LatencyTargets, t.String())
	}
	full := newMeasureReport(measure.Target{}, ep, lt, res)
	rep.Download, rep.Upload = full.Download, full.Upload
	if *asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
		return exitOK
	}
	writeBench(e.stdout, rep, res, targets)
	return exitOK
}

func writeBench(w io.Writer, rep benchReport, res loadTestResult, targets []netip.Addr) {
	fmt.Fprintf(w, "bench against %s; latency to %s (not exempt from shaping)\n", rep.Server, describeTargets(targets))
	fmt.Fprintf(w, "%-10s %-13s %-10s %s\n", "", "throughput", "p50", "p90")
	fmt.Fprintf(w, "%-10s %-13s %-10s %s\n", "idle", "", humanDuration(res.idle(p50)), humanDuration(res.idle(p90)))
	for _, ph := range []struct {
		name string
		bps  float64
		pl   phaseLatency
	}{{"download", res.Download.BitsPerSecond, res.DownLatency}, {"upload", res.Upload.BitsPerSecond, res.UpLatency}} {
		fmt.Fprintf(w, "%-10s %-13s %-10s %s\n", ph.name, humanRate(ph.bps), signedOrDash(ph.pl.Added.P50), signedOrDash(ph.pl.Added.P90))
	}
	fmt.Fprintln(w, "(under load: the latency added, loaded minus idle at the same percentile)")
}
