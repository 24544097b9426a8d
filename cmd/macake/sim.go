// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/internal/docsite"
	"github.com/macake/macake/score"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/autorate"
	"github.com/macake/macake/sim/linkmodel"
	"github.com/macake/macake/sim/report"
	"github.com/macake/macake/sim/simrun"
)

var simCmd = &command{
	name:  "sim",
	args:  "[--link starlink|lte|cable|dsl | --trace FILE[:COLUMN] | --traces DIR] [flags]",
	short: "Run controllers against a recorded or modelled link, offline.",
	long: `Replays a link (a built-in seeded model, or a capacity trace) packet by
packet with TCP flows, the macOS dummynet pipes in front of it and each
controller in the loop, fed only what the daemon sees. The controllers run
side by side on the same link and seed and are compared by the metrics of
the benchmark: utilisation U, added delay D50/D95/D99 from an independent
100 Hz probe through the pipes, taken over every probe sent (a lost one
counts as --lost-delay, 1 s) with the loss beside it, recovery after
capacity drops, rate changes, and the score U/(1 + D95/30 ms); then what a
call beside the load felt (50 packets/s of 200 bytes each way through the
pipes: loss, one-way delay, jitter). A second run shows the
drift-controlled off / on / off table (throughput, added median and p90),
as MaCake reports it.

Deterministic: the same flags and seed give the same numbers on any machine.

With --traces DIR, every trace in the directory (mahimahi or rate-series CSV files) runs with
several seeds and start offsets, and one table compares the controllers per
trace by their median score. A controller wins a trace when its D95 is no
higher and its U at most 0.02 lower, one of them by more than the noise;
otherwise a score higher by more than the noise wins; else it is a tie
(` + docsite.Page("MEASUREMENTS.md", "") + `).

Examples:
  macake sim --link starlink --svg starlink.svg
  macake sim --trace traces/TMobile-LTE-short.down    (a mahimahi trace)
  macake sim --traces traces --controllers upstream,ours

Exit status: 0 success; 1 a trace cannot be read or a run failed; 64 usage
(a flag's value or combination, e.g. an unknown --link model); 78 the
--policy file is invalid.`,
}

func init() { simCmd.run = runSim }

func runSim(e *env, args []string) int {
	c := simCmd
	fs := c.flags()
	var (
		f      simrun.Spec
		svg    string
		asJSON bool
	)
	fs.StringVar(&f.Link, "link", "", "built-in link `MODEL`: "+strings.Join(linkmodel.Names, ", "))
	fs.StringVar(&f.Trace, "trace", "", "capacity trace `FILE[:COLUMN]` (mahimahi or a rate-series CSV)")
	fs.StringVar(&f.Traces, "traces", "", "run every trace in `DIR` (mahimahi or rate-series CSV files) and print one table")
	fs.StringVar(&f.Policy, "policy", "", "links.d policy `FILE`: adds the controller `macake watch` builds from it (arm \"policy\"); upstream and ours take its rate bounds")
	durationVar(fs, &f.Duration, "duration", 60*time.Second, "simulated time per run")
	fs.IntVar(&f.Flows, "flows", 4, "bulk TCP flows per loaded direction")
	fs.StringVar(&f.Direction, "direction", "", "the loaded `DIRECTION`: both, download or upload (default: both for --link, the trace's own for a trace)")
	fs.StringVar(&f.CC, "cc", "cubic", "congestion control `ALGORITHM` of the flows: cubic or reno")
	durationVar(fs, &f.Buffer, "buffer", 0, "bottleneck buffer, in time at mean capacity, 10ms–1m (default: 1 s; the starlink model 250 ms)")
	durationVar(fs, &f.BaseRTT, "base-rtt", 0, "base RTT of the path (default: the model's or the trace class's)")
	fs.Uint64Var(&f.Seed, "seed", 1, "random seed (link model, jitter, losses, flow starts)")
	durationVar(fs, &f.Offset, "offset", 0, "where in the trace to start")
	fs.StringVar(&f.Controllers, "controllers", "", "comma-separated `CONTROLLERS` to compare (default "+simrun.DefaultControllers()+"); available: "+strings.Join(simrun.AvailableControllers(), ", ")+
		"; and variants such as upstream+CutToAchieved, ours-CutToAchieved or ours@AchievedCut=0.8@Dir.DelayThreshold=20ms (switches: "+strings.Join(autorate.Switches(), ", ")+"; @Field=value sets a field of tuning.Config, Dir.Field both directions)")
	fs.StringVar(&f.Queue, "queue", "auto", "the pipe `QUEUE` at each rate change: auto (the daemon's: min of the BDP and 20 ms), bdp, a delay target like 10ms, or a size like 256KB")
	fs.StringVar(&f.Shaper, "shaper", "dummynet", "the pipes' drop rule, the `SHAPER`: dummynet (macOS: full once over the limit) or htb (Linux htb + bfifo: a packet that does not fit)")
	durationVar(fs, &f.ActuationDelay, "actuation-delay", 10*time.Millisecond, "time from a controller's decision to the pipe running at the new rate")
	fs.IntVar(&f.ProbeBurst, "probe-burst", 1, "probes sent at once by the 6-reflector prober: 1 one every 50 ms (cake-autorate), 2 two every 100 ms (macake watch), up to 6")
	durationVar(fs, &f.Warmup, "warmup", 2*time.Second, "start of the run left out of the metrics")
	durationVar(fs, &f.LostDelay, "lost-delay", score.DefaultLostDelay, "the delay a lost probe or call packet counts as in D50–D99 and the score")
	fs.StringVar(&f.Loss, "loss", "", "random loss at the bottleneck, `DOWN,UP` probabilities (e.g. 0.0001,0.002 as LeoCC models Starlink)")
	fs.StringVar(&f.Candidates, "candidates", "", "with --traces: the `VARIANTS` the leave-one-source-out estimate chooses among, run besides --controllers (default "+simrun.DefaultCandidates+": the 36 variants of the tuning grid macake's law was chosen from; none: no estimate)")
	fs.StringVar(&f.Phases, "phases", "auto", "`CONTROLLER` for the off/on/off table (auto, none to skip)")
	fs.StringVar(&svg, "svg", "", "write rates, capacity and added delay over time to `FILE`")
	fs.BoolVar(&asJSON, "json", false, "print the results as JSON")
	durationVar(fs, &f.Rebin, "rebin", 0, "replay the trace as one rate per `STEP` (e.g. 100ms, as a tc testbed does) instead of its exact delivery opportunities")
	fs.IntVar(&f.Seeds, "seeds", 5, "with --traces: seeds per trace")
	fs.IntVar(&f.Offsets, "offsets", 3, "with --traces: start offsets per trace")
	fs.IntVar(&f.Workers, "workers", 0, "parallel runs (default: one per CPU)")
	if done, code := c.parseNoArgs(e, fs, args); done {
		return code
	}
	f.Series = svg != ""
	if f.Traces != "" {
		return runTraceBench(e, f, svg, asJSON)
	}
	r, err := simrun.NewSingle(f)
	if err != nil {
		return simFailed(e, err)
	}
	out, err := r.Run()
	if err != nil {
		return simFailed(e, err)
	}
	if svg != "" {
		if err := writeSVG(svg, r.SVGTitle(), out.Results); err != nil {
			return simFailed(e, err)
		}
	}
	if asJSON {
		return printSimJSON(e, r.Document(out))
	}
	fmt.Fprintf(e.stdout, "macake sim: %s\n\n", r.Title())
	if r.Policy != nil {
		fmt.Fprintf(e.stdout, "%s\n\n", simrun.PolicyLimits)
	}
	report.Comparison(e.stdout, out.Results)
	if out.Phased != nil {
		fmt.Fprintln(e.stdout)
		report.Phases(e.stdout, r.PhaseArm.Name, out.Phased)
	}
	if svg != "" {
		fmt.Fprintf(e.stdout, "\nWrote %s.\n", svg)
	}
	return exitcode.OK
}

// simFailed prints err and maps it to the exit status: the user's flags
// are a usage error, the --policy file a configuration error, and anything
// else (a file that cannot be read, a run that fails) a failure.
func simFailed(e *env, err error) int {
	fmt.Fprintf(e.stderr, "macake sim: %v\n", err)
	switch {
	case errors.As(err, new(simrun.UsageError)):
		return exitcode.Usage
	case errors.As(err, new(simrun.ConfigError)):
		return exitcode.Config
	}
	return exitcode.Failure
}

func writeSVG(path, title string, results []*sim.Result) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write svg: %w", err)
	}
	if err := report.SVG(out, title, results); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write svg: %w", err)
	}
	return nil
}

func printSimJSON(e *env, doc any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return simFailed(e, err)
	}
	return exitcode.OK
}

// runTraceBench runs every trace of --traces with every controller.
func runTraceBench(e *env, f simrun.Spec, svg string, asJSON bool) int {
	b, err := simrun.NewBench(f)
	if err != nil {
		return simFailed(e, err)
	}
	if svg != "" {
		fmt.Fprintln(e.stderr, "macake sim: --svg draws one run; it is ignored with --traces")
	}
	cfg := b.Config
	fmt.Fprintf(e.stderr, "macake sim: %d traces × %d controllers × %d seeds × %d offsets = %d runs of %v...\n",
		len(b.Cases), len(cfg.Arms), cfg.Seeds, cfg.Offsets, b.Runs(), cfg.Options.Duration)
	start := time.Now()
	res, err := b.Run()
	if err != nil {
		return simFailed(e, err)
	}
	fmt.Fprintf(e.stderr, "macake sim: done in %v.\n", time.Since(start).Round(time.Second))
	loso, err := b.LOSO(res)
	if err != nil {
		return simFailed(e, err)
	}
	if asJSON {
		return printSimJSON(e, simrun.NewBenchDocument(res, loso))
	}
	report.Bench(e.stdout, res, "upstream", "ours", loso)
	return exitcode.OK
}
