// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/sense/probe"
)

// TestWatchCost measures what docs/MEASUREMENTS.md reports for watch (it
// is a measurement, not a check, and runs only when asked):
//
//	MACAKE_MEASURE_WATCH=1 go test ./cmd/macake -run TestWatchCost -v -count=1
//
// A real `macake watch` (Linux, against the emulator binaries) runs one
// autorate link on lo with six loopback reflectors probed every 300 ms (20
// probes a second, both directions from each reply), the default drift
// interval, sleep off so that probing never stops. It reports the
// daemon's own CPU time and resident memory over 60 s, the commands of one
// drift check that finds nothing to change, and the time from saving a
// policy file to the changed pipe.
func TestWatchCost(t *testing.T) {
	if os.Getenv("MACAKE_MEASURE_WATCH") == "" {
		t.Skip("a 90 s measurement; set MACAKE_MEASURE_WATCH=1 to run it")
	}
	// What a wake-up costs on this machine, for scale: a bare 40 Hz ticker
	// (the wake-ups of 20 probes a second and their replies), and the
	// prober alone on the six reflectors, both in this (otherwise idle)
	// test process.
	selfCPU := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	const baseline = 20 * time.Second
	c0, start := selfCPU(), time.Now()
	tick := time.NewTicker(25 * time.Millisecond)
	for time.Since(start) < baseline {
		<-tick.C
	}
	tick.Stop()
	t.Logf("baseline, a bare 40 Hz ticker: %.3f %% of one core", 100*float64(selfCPU()-c0)/float64(time.Since(start)))
	var addrs []netip.Addr
	for i := 2; i <= 7; i++ {
		addrs = append(addrs, netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}))
	}
	p, err := probe.New(probe.Config{Reflectors: addrs})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), baseline)
	c0, start = selfCPU(), time.Now()
	go p.Run(ctx)
	n := 0
	for range p.Samples() {
		n++
	}
	cancel()
	t.Logf("baseline, the prober alone (6 loopback reflectors every 300 ms, %d replies): %.3f %% of one core", n, 100*float64(selfCPU()-c0)/float64(time.Since(start)))

	m := newE2EMac(t)
	os.WriteFile(m.facts, []byte(`{"interfaces":[{"name":"lo","up":true,"gateway_ip":"127.0.0.1","gateway_mac":"02:00:00:00:00:01"}]}`), 0o644)
	policy := configtest.Policy{Interface: "lo", Download: "%s", Upload: "20mbit"}.TOML() + `[autorate]
reflectors = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"]
active_reflectors = 6
probe_interval = "300ms"
sleep = false
`
	m.write("lab", fmt.Sprintf(policy, "80mbit"))
	w := m.startWatchWith("--drift-interval", "30s")
	pid := w.cmd.Process.Pid
	time.Sleep(5 * time.Second) // warm up: baselines, first drift check

	cpu0, sys0, rss0 := procStat(t, pid)
	cs0 := contextSwitches(t, pid)
	start = time.Now()
	callsBefore := len(m.emu().Calls())
	time.Sleep(60 * time.Second)
	cpu1, sys1, rss1 := procStat(t, pid)
	cs1 := contextSwitches(t, pid)
	wall := time.Since(start)
	calls := m.emu().Calls()[callsBefore:]
	t.Logf("CPU: %v (%v of it in the kernel) over %v = %.3f %% of one core", cpu1-cpu0, sys1-sys0, wall.Round(time.Millisecond), 100*float64(cpu1-cpu0)/float64(wall))
	t.Logf("context switches (all threads): %.0f a second", float64(cs1-cs0)/wall.Seconds())
	t.Logf("resident memory: %d KiB at start of the window, %d KiB at its end", rss0, rss1)
	st := m.status()
	if c := st.Links[0].Controller; c != nil {
		t.Logf("controller: %d replies in the run (%.1f per second since start)", c.Responses, float64(c.Responses)/st.Daemon.UptimeSeconds)
	}
	var mutating, reads []string
	for _, c := range calls {
		s := strings.Join(append([]string{filepath.Base(c.Argv[0])}, c.Argv[1:]...), " ")
		if c.Mutating {
			mutating = append(mutating, s)
		} else {
			reads = append(reads, s)
		}
	}
	slices.Sort(reads)
	t.Logf("commands in the window (two drift checks): %d reads, %d changes %q; reads: %q", len(reads), len(mutating), mutating, slices.Compact(reads))

	// Save to applied change, through the directory watch (the drift
	// interval is 30 s, so only the watch can be this quick).
	var lat []time.Duration
	for i, rate := range []string{"81mbit", "82mbit", "83mbit", "84mbit", "85mbit", "86mbit", "87mbit", "88mbit", "89mbit", "90mbit"} {
		want := int64(81+i) * 1_000_000
		saved := m.write("lab", fmt.Sprintf(policy, rate))
		for m.pipes()[48002] != want {
			if time.Since(saved) > 10*time.Second {
				t.Fatalf("the change to %s was not applied in 10 s", rate)
			}
			time.Sleep(2 * time.Millisecond)
		}
		lat = append(lat, time.Since(saved))
		time.Sleep(500 * time.Millisecond)
	}
	slices.Sort(lat)
	t.Logf("file save to applied change, 10 saves: min %v, median %v, max %v", lat[0].Round(time.Millisecond), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	w.stop(syscall.SIGTERM)
}

// procStat returns a process's CPU time (user + system), its system part
// and its resident set (KiB) from /proc.
func procStat(t *testing.T, pid int) (cpu, sys time.Duration, rssKiB int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name in parentheses; utime and stime are
	// fields 14 and 15 (1-based), in clock ticks (100 per second).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var rss int64
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			rss, _ = strconv.ParseInt(strings.Fields(line)[1], 10, 64)
		}
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, time.Duration(st) * 10 * time.Millisecond, rss
}

// contextSwitches sums the voluntary and involuntary context switches of
// every thread of a process: how often it went to sleep and was woken,
// which is what a mostly idle daemon pays for (on a VM far more than
// for its work).
func contextSwitches(t *testing.T, pid int) int64 {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			continue // the thread exited meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "voluntary_ctxt_switches:") || strings.HasPrefix(line, "nonvoluntary_ctxt_switches:") {
				v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
				n += v
			}
		}
	}
	return n
}
