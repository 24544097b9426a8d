// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/cmd/macake/internal/shaperun"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/daemon/watchswitch"
	"github.com/macake/macake/internal/terminal"
	"github.com/macake/macake/score"
	"github.com/macake/macake/sense/measure"
)

var benchCmd = &command{
	name:  "bench",
	args:  "[--json] [--compare] [--server URL] [--duration D] [--reflector ADDR ...]",
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

--compare does that comparison itself: unshaped, shaped, then unshaped
again, and prints the three side by side with the grade before and after.
It needs root: with macake watch running it pauses the daemon's shaping for
the unshaped runs (a lease: the daemon resumes by itself if bench dies);
without it, it takes the shaping down and applies it, and leaves it as it
found it.

Latency is measured to the speed-test server's own address, which macake
does not exempt from shaping (unlike the controller's reflectors), so the
result includes every delay the shaper adds. The latency under load is
taken over every probe sent, a lost one counting as --lost-delay (1 s) more
than idle, and the share lost is printed beside it: a dropped packet is a
glitch a call or a game feels. --reflector adds targets. Nothing is saved.

Endpoints: Cloudflare's public speed test by default; --server URL for a
server started with "macake measure --serve ADDR".

Exit status: 0 success; 1 the server cannot be reached or a phase failed;
64 usage (a flag's value, e.g. a --server that is not an http(s) URL).`,
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
	var extra reflectorList
	fs.Var(&extra, "reflector", "also measure latency to `ADDR` (or tcp:ADDR:PORT, udp:ADDR:PORT; repeatable)")
	compare := fs.Bool("compare", false, "run unshaped, shaped, then unshaped again and compare the grades (takes macake's shaping off and on; needs root)")
	var settle, lostDelay time.Duration
	durationVar(fs, &settle, "settle", 10*time.Second, "with --compare: wait this long after the shaping is back before the shaped run")
	durationVar(fs, &lostDelay, "lost-delay", score.DefaultLostDelay, "a probe lost under load counts as this much latency added (the latency is taken over every probe sent)")
	if done, code := benchCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	if duration < 2*time.Second || idle < time.Second || *streams < 1 || *streams > 64 || lostDelay <= 0 || lostDelay > time.Minute {
		fmt.Fprintln(e.stderr, "macake bench: --duration must be at least 2s, --idle at least 1s, --streams 1 to 64, --lost-delay above 0 and at most 1m")
		return exitcode.Usage
	}
	if code, ok := checkServerFlag(e, "bench", *server); !ok {
		return code
	}
	if *compare {
		if ok, code := e.requireRoot("bench --compare"); !ok {
			return code
		}
	}
	ep, targets, err := measure.BenchTargets(e.ctx, *server, extra)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake bench: %v\n", err)
		return exitcode.Failure
	}
	lt := measure.LoadTest{
		Endpoint: ep, Streams: *streams, Idle: idle, Duration: duration, Targets: targets,
		ProbeInterval: 100 * time.Millisecond, Progress: e.stderr, TTY: terminal.IsTerminal(e.stderr), Command: "bench", LostDelay: lostDelay,
	}
	bench := func(ctx context.Context) (measure.BenchReport, error) {
		res, err := lt.Run(ctx)
		return measure.NewBenchReport(ep, lt, res), err
	}
	if *compare {
		return runCompare(e, measure.Compare{Bench: bench, Settle: settle, Progress: e.stderr,
			// Long enough for a run that stalls to fail first.
			Lease: 2*(idle+3*duration) + 30*time.Second}, *asJSON)
	}
	rep, err := bench(e.ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake bench: %v\n", err)
		return exitcode.Failure
	}
	if *asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
		return exitcode.OK
	}
	rep.WriteText(e.stdout)
	return exitcode.OK
}

// runCompare runs bench --compare with the switch that fits: the running
// watch's pause, or the one-shot apply and down of this command line.
func runCompare(e *env, c measure.Compare, asJSON bool) int {
	st, err := gatherStatus(e, statusapi.Query{})
	if err != nil {
		// Without knowing whether the shaping is on, the compare could not
		// leave it as it found it.
		fmt.Fprintf(e.stderr, "macake bench --compare: cannot tell whether macake shapes now: %v\n", err)
		return exitcode.Failure
	}
	switch {
	case st.Daemon.Running && !st.Daemon.PermissionDenied:
		c.Switch, c.LeaveOn = watchswitch.Switch{Socket: statusapi.SocketPath(stateDirOf(e))}, true
		fmt.Fprintln(e.stderr, "bench --compare: macake watch runs; it pauses its shaping for the unshaped runs")
	default:
		shaped := false
		for _, l := range st.Links {
			shaped = shaped || l.Shaped
		}
		c.Switch, c.LeaveOn = shaperun.Switch{Env: e.shaping(), Cmd: "bench --compare"}, shaped
		fmt.Fprintln(e.stderr, "bench --compare: macake watch does not run; macake down and apply take the shaping off and put it on")
	}
	rep, err := c.Run(e.ctx)
	if err != nil {
		// The runs that finished are measurements too.
		if len(rep.Runs) > 0 && !asJSON {
			rep.WriteText(e.stdout)
		}
		fmt.Fprintf(e.stderr, "macake bench --compare: %v\n", err)
		return exitcode.Failure
	}
	if asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
		return exitcode.OK
	}
	rep.WriteText(e.stdout)
	return exitcode.OK
}
