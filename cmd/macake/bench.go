// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/macake/macake/sense/measure"
)

var benchCmd = &command{
	name:  "bench",
	args:  "[--json] [--server URL] [--duration D] [--reflector ADDR ...]",
	short: "One-shot throughput and latency under load, for A/B comparisons.",
	long: `Runs an idle phase, then a download, an upload and both at once, each
saturating the link, and reports the throughput of each and the latency the
load added, like for like at each percentile (loaded p50 minus idle p50,
loaded p90 minus idle p90), with the grades people know: the bufferbloat
grade A+ to F (DSLReports/Waveform: from the added median) per direction,
both ways and overall, and the responsiveness in round trips per minute
(RPM, as Apple's networkQuality) under each load, with a note when the run
was too short or too noisy to trust. Run it before and after a change (a
policy, a rate, shaping on or off) and compare.

Latency is measured to the speed-test server's own address, which macake's
pf rules do not exempt from shaping (unlike the controller's reflectors), so
the result includes every delay the shaper adds. --reflector adds targets.
Nothing is saved.

Endpoints: Cloudflare's public speed test by default; --server URL for a
server started with "macake measure --serve ADDR".`,
}

func init() { benchCmd.run = runBench }

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
	ep, targets, err := measure.ChooseEndpoint(e.ctx, *server, nil)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake bench: %v\n", err)
		return exitFailure
	}
	if *server == "" {
		// The public endpoint's own address is the non-exempt target.
		if host, err := measure.ResolveHost(e.ctx, ep.Host()); err == nil {
			targets = append(targets, host)
		}
	}
	for _, a := range extra {
		if !slices.Contains(targets, a) {
			targets = append(targets, a)
		}
	}
	if len(targets) == 0 {
		fmt.Fprintf(e.stderr, "macake bench: cannot resolve %s for latency; pass --reflector ADDR\n", ep.Host())
		return exitFailure
	}
	lt := measure.LoadTest{
		Endpoint: ep, Streams: *streams, Idle: idle, Duration: duration, Targets: targets,
		ProbeInterval: 100 * time.Millisecond, Progress: e.stderr, TTY: isTerminal(e.stderr), Command: "bench",
	}
	res, err := lt.Run(e.ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake bench: %v\n", err)
		return exitFailure
	}
	rep := measure.NewBenchReport(ep, lt, res)
	if *asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
		return exitOK
	}
	rep.WriteText(e.stdout)
	return exitOK
}
