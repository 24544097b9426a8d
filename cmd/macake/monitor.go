// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
)

var monitorCmd = &command{
	name:  "monitor",
	args:  "[--json] [--reflector ADDR ...] [--interval D] [--every D] [--duration D] [--log-file PATH]",
	short: "Sample latency to the reflectors continuously, without shaping.",
	long: `Probes the reflectors (the matching policy's, the defaults, or --reflector)
and reads the default-route interface's byte counters, and prints one line
per second: the round-trip time, the delay above each reflector's rolling
baseline (p50 and p90 over the reflectors' samples of that second), the
losses, and the throughput each way (shown as - while no interface
carries the default route; --reflector still probes then). With ICMP
timestamps the one-way delay deltas of each direction are shown too.
--json prints one JSON object per line instead. Interrupt it (Ctrl-C)
for a summary: samples, loss, baselines, and p50/p90 of the delay. --log-file writes the lines to a file
instead, rotated at 10 MiB with 5 old files kept (the LaunchAgent passes
~/Library/Logs/macake/monitor.log): a line a second is about 10 MB a day.

The baseline follows cake-autorate's: it drops at once to a lower delay and
creeps up over minutes, so a queue shows as a delta above it. No root is
needed; on Linux unprivileged ICMP needs net.ipv4.ping_group_range.

Exit status: 0 after an interrupt or --duration, when a reflector answered;
1 no reflector answered, no interface carries the default route (and no
--reflector was given), or the log file cannot be opened; 64 usage.`,
}

func init() { monitorCmd.run = runMonitor }

func runMonitor(e *env, args []string) int {
	fs := monitorCmd.flags()
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	var interval, every, duration time.Duration
	durationVar(fs, &interval, "interval", 0, "probe interval per reflector; 0 means the policy's probe_interval (300ms by default)")
	durationVar(fs, &every, "every", time.Second, "print a line this often")
	durationVar(fs, &duration, "duration", 0, "stop after this long; 0 runs until interrupted")
	logFile := fs.String("log-file", "", "write the lines and the summary to `PATH`, rotated, instead of standard output")
	var reflectors reflectorList
	fs.Var(&reflectors, "reflector", "reflector to probe instead of the policy's or the defaults: `ADDR`, tcp:ADDR:PORT or udp:ADDR:PORT (repeatable)")
	if done, code := monitorCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	// The flags' grammar refuses negative durations.
	if (interval > 0 && interval < 10*time.Millisecond) || every < 100*time.Millisecond {
		fmt.Fprintln(e.stderr, "macake monitor: --interval must be at least 10ms, --every at least 100ms")
		return exitcode.Usage
	}
	var out io.Writer = e.stdout
	if *logFile != "" {
		f, err := logging.OpenFile(*logFile, logging.FileOptions{})
		if err != nil {
			fmt.Fprintf(e.stderr, "macake monitor: %v\n", err)
			return exitcode.Failure
		}
		defer f.Close()
		out = f
	}
	target, err := resolveTarget(e, "", reflectors)
	switch {
	case errors.Is(err, desired.ErrNoDefaultRoute) && len(reflectors) > 0:
		// The given reflectors may well be reachable (on the LAN, in a
		// lab): probe them; throughput waits for a default route.
		fmt.Fprintf(e.stderr, "note: %v; probing only, throughput is not shown until a default route appears\n", err)
	case errors.Is(err, desired.ErrNoDefaultRoute):
		fmt.Fprintf(e.stderr, "macake monitor: %v (or pass --reflector ADDR to probe a reachable host without throughput)\n", err)
		return exitcode.Failure
	case err != nil:
		fmt.Fprintf(e.stderr, "macake monitor: %v\n", err)
		return exitcode.Failure
	}
	if interval > 0 {
		target.ProbeInterval = interval
	}
	var facts linkfacts.Source
	if src, err := linkfacts.FromEnv(e.getenv, linkfacts.SystemOptions{}); err == nil {
		facts = src
		if c, ok := src.(io.Closer); ok {
			defer c.Close()
		}
	}
	mon, err := measure.NewMonitor(target, every, facts)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake monitor: %v\n", err)
		return exitcode.Failure
	}
	ctx := e.ctx
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}

	if !*asJSON {
		iface := target.Interface
		if iface == "" {
			iface = "(no default route)"
		}
		header := fmt.Sprintf("monitoring %s: %d reflectors every %v (%s); Ctrl-C for a summary\n", iface, len(target.Reflectors), target.ProbeInterval, measure.DescribeTargets(target.Probes()))
		fmt.Fprint(e.stderr, header)
		if *logFile != "" {
			// The log says when each run began and what it probes.
			fmt.Fprintf(out, "%s  %s", time.Now().Format("2006-01-02 15:04:05"), header)
		}
	}
	sum := mon.Run(ctx, func(l measure.MonitorLine) {
		if *asJSON {
			b, _ := json.Marshal(l)
			fmt.Fprintln(out, string(b))
		} else if *logFile != "" {
			// A log outlives a day: its lines carry the date.
			fmt.Fprintln(out, l.Time.Local().Format("2006-01-02 ")+l.Text())
		} else {
			fmt.Fprintln(out, l.Text())
		}
	})
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"summary": sum})
		fmt.Fprintln(out, string(b))
	} else {
		sum.WriteText(out)
	}
	if sum.Replies == 0 {
		fmt.Fprintf(e.stderr, "macake monitor: no reflector answered (%s): check the network, or pass --reflector ADDR\n", measure.DescribeTargets(target.Probes()))
		return exitcode.Failure
	}
	return exitcode.OK
}
