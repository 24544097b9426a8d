// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/execrun"
)

// `make bench-daemon` runs TestBenchDaemon: what `macake watch` costs on a
// real link (the testbed's constant 50/10 Mbit/s bottleneck), idle and
// under CUBIC load, next to a bare Go ticker at the probe rate measured in
// the same windows, and the same watch writing each rate change with a tc
// process (MACAKE_NETLINK=off: the process-per-change model of upstream
// and of macake before netlink). Every tc and ip the daemon starts goes
// through a logging wrapper, which is how processes are counted.
var (
	benchDaemon = flag.Bool("e2e.bench-daemon", false, "run TestBenchDaemon (make bench-daemon) and print its table")
	benchWindow = flag.Duration("e2e.bench-window", 30*time.Second, "length of each measured window of TestBenchDaemon")
	benchSaves  = flag.Int("e2e.bench-saves", 10, "policy saves timed by TestBenchDaemon")
)

// bareTicker is the baseline program: a Go ticker doing nothing, built on
// its own. (The test binary itself would not do: its packages' start-up
// leaves more threads running, which wake with every tick, and it made
// about twice the context switches of this program.)
const bareTicker = `package main

import (
	"os"
	"strconv"
	"time"
)

func main() {
	hz, err := strconv.Atoi(os.Args[1])
	if err != nil || hz <= 0 {
		os.Exit(2)
	}
	for range time.NewTicker(time.Second / time.Duration(hz)).C {
	}
}
`

// buildBareTicker builds bareTicker into dir.
func buildBareTicker(t *testing.T, dir string) string {
	t.Helper()
	src, bin := filepath.Join(dir, "ticker.go"), filepath.Join(dir, "ticker")
	if err := os.WriteFile(src, []byte(bareTicker), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := execrun.Command{Argv: []string{"go", "build", "-o", bin, src}}
	res, err := execrun.Exec{Timeout: 2 * time.Minute, Env: []string{"CGO_ENABLED=0"}}.Run(context.Background(), cmd)
	if _, err := execrun.Check(cmd, res, err); err != nil {
		t.Fatalf("building the bare ticker: %v", err)
	}
	return bin
}

// procSample is what /proc says about a process at one moment.
type procSample struct {
	at time.Time
	// cpu is the time its threads ran (schedstat, ns precision); children
	// the user+system time of its waited-for children (stat, 10 ms).
	cpu, children time.Duration
	// switches are voluntary + involuntary context switches of its threads.
	switches int64
	// rss is the resident set; anon the part of it that is not pages of
	// the binary (heap, stacks, runtime).
	rss, anon int64
}

func sampleProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return s, err
	}
	for _, task := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s/", pid, task.Name())
		if b, err := os.ReadFile(dir + "schedstat"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				s.cpu += time.Duration(ns)
			}
		}
		if b, err := os.ReadFile(dir + "status"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				k, v, _ := strings.Cut(line, ":")
				if k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches" {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					s.switches += n
				}
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 15 {
		return s, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	cu, _ := strconv.ParseInt(fields[13], 10, 64)
	cs, _ := strconv.ParseInt(fields[14], 10, 64)
	s.children = time.Duration(cu+cs) * time.Second / clockTicks
	_, s.rss, _, err = readProcessCost(pid)
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, _ := strings.Cut(line, ":"); k == "RssAnon" {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				s.anon = kb << 10
			}
		}
	}
	return s, err
}

// window is one measured interval of the daemon and of the baseline.
type window struct {
	name                    string
	daemon, daemon2         procSample
	ticker, ticker2         procSample
	procs                   int
	tcProcs, ipProcs, reads int
}

func pct(d time.Duration, over time.Duration) float64 { return 100 * d.Seconds() / over.Seconds() }

func (w window) wall() time.Duration { return w.daemon2.at.Sub(w.daemon.at) }

func (w window) row() string {
	wall := w.wall()
	self := w.daemon2.cpu - w.daemon.cpu
	tree := self + w.daemon2.children - w.daemon.children
	bare := w.ticker2.cpu - w.ticker.cpu
	return fmt.Sprintf("| %s | %.2f %% | %.2f %% | %.1f | %.1f MiB (%.1f anonymous) | %.2f (%d in %.0f s: %d tc, %d ip; %d of them reads) | %.2f %%, %.1f switches/s | %.1f× |",
		w.name, pct(tree, wall), pct(self, wall), float64(w.daemon2.switches-w.daemon.switches)/wall.Seconds(),
		float64(w.daemon2.rss)/(1<<20), float64(w.daemon2.anon)/(1<<20), float64(w.procs)/wall.Seconds(), w.procs, wall.Seconds(), w.tcProcs, w.ipProcs, w.reads,
		pct(bare, wall), float64(w.ticker2.switches-w.ticker.switches)/wall.Seconds(), tree.Seconds()/max(bare.Seconds(), 1e-9))
}

// toolLog is the log the wrapper scripts append to: one line per process.
type toolLog string

// wrap writes a wrapper for the real program that logs its arguments.
func (l toolLog) wrap(t *testing.T, dir, name string) string {
	real, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("skipping: %s not installed", name)
	}
	path := filepath.Join(dir, name)
	// Builtins only: the wrapper costs one shell start, not two processes.
	body := fmt.Sprintf("#!/bin/sh\necho \"%s $*\" >> %s\nexec %s \"$@\"\n", name, l, real)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// count returns the log's lines from line from on: all, tc, ip, and
// those that only read (show, -j).
func (l toolLog) count(from int) (all, tc, ip, reads, lines int) {
	f, err := os.Open(string(l))
	if err != nil {
		return 0, 0, 0, 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines++
		if lines <= from {
			continue
		}
		line := sc.Text()
		all++
		if strings.HasPrefix(line, "tc ") {
			tc++
		} else {
			ip++
		}
		if strings.Contains(line, " show") || strings.Contains(line, " -j ") {
			reads++
		}
	}
	return all, tc, ip, reads, lines
}

func TestBenchDaemon(t *testing.T) {
	if !*benchDaemon {
		t.Skip("skipping: run with `make bench-daemon` (-e2e.bench-daemon)")
	}
	tr := Trace{Name: "constant", Steps: []Step{{Download: 50_000_000, Upload: 10_000_000}}, Length: time.Hour}
	tb := NewTestbed(t, "mkbd", tr)
	tb.Client.DisableOffloads(ClientDev)
	bin := macake(t)

	// The baseline: a bare Go ticker at the probe rate (20 Hz), one
	// thread like the daemon (GOMAXPROCS=1).
	dir := t.TempDir()
	ticker := exec.Command(buildBareTicker(t, dir), "20")
	ticker.Env = append(os.Environ(), "GOMAXPROCS=1")
	if err := ticker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ticker.Process.Kill(); ticker.Wait() }()

	log := toolLog(filepath.Join(dir, "tools.log"))
	tcWrap, ipWrap := log.wrap(t, dir, "tc"), log.wrap(t, dir, "ip")

	var rows []string
	run := func(label string, netlink bool, idle bool, saves int) {
		m := NewMacake(t, bin, tb.Client, ClientDev, ispLAN)
		m.Env = append(m.Env, "MACAKE_TC="+tcWrap, "MACAKE_IP="+ipWrap)
		if !netlink {
			m.Env = append(m.Env, "MACAKE_NETLINK=off")
		}
		m.SetPolicy(t, "bench", AutoratePolicy(tr, config.LawMacake, Reflectors))
		w := newWatchShaper(m, tb)
		ctx := context.Background()
		w.StartFor(t)
		time.Sleep(5 * time.Second) // the controller's warm-up
		measure := func(name string) {
			_, _, _, _, from := log.count(0)
			d0, err1 := sampleProc(w.pid)
			k0, err2 := sampleProc(ticker.Process.Pid)
			time.Sleep(*benchWindow)
			d1, err3 := sampleProc(w.pid)
			k1, err4 := sampleProc(ticker.Process.Pid)
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				t.Fatalf("reading /proc: %v", err)
			}
			all, tcs, ips, reads, _ := log.count(from)
			rows = append(rows, window{name: label + ", " + name, daemon: d0, daemon2: d1, ticker: k0, ticker2: k1,
				procs: all, tcProcs: tcs, ipProcs: ips, reads: reads}.row())
		}
		if idle {
			measure("idle")
		}
		load, err := tb.StartLoad(ctx, 4, 2)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		measure("loaded (4 down + 2 up CUBIC)")
		if err := load.Stop(); err != nil {
			t.Logf("load: %v", err)
		}
		if saves > 0 {
			lat := timeSaves(t, m, tb, tr, saves)
			rows = append(rows, fmt.Sprintf("| %s, policy saved → new shaper live | median %v (min %v, max %v, %d saves) | | | | | | |",
				label, lat[len(lat)/2].Round(time.Millisecond), lat[0].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), len(lat)))
		}
		if _, err := w.Stop(ctx); err != nil {
			t.Errorf("stopping watch: %v", err)
		}
	}
	run("watch (netlink)", true, true, *benchSaves)
	run("watch, a tc process per change (MACAKE_NETLINK=off)", false, false, 0)

	header := "| run | CPU, whole tree | CPU, daemon | context switches/s | RSS | processes/s | bare 20 Hz ticker, same window: CPU, context switches | tree ÷ ticker (CPU) |\n|---|---|---|---|---|---|---|---|"
	table := header + "\n" + strings.Join(rows, "\n")
	t.Logf("\n%s", table)
	fmt.Printf("\n%s\n\n(%s; windows of %v; GOMAXPROCS=1 for both processes)\n", table, time.Now().UTC().Format(time.DateOnly), *benchWindow)
	if *reportFile != "" {
		f, err := os.OpenFile(*reportFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "## macake watch, daemon cost\n\n%s\n\n", table)
			f.Close()
		}
	}
}

// timeSaves edits the policy's queue size n times and returns the sorted
// times from each save until the leaf qdisc shows the new limit.
func timeSaves(t *testing.T, m *Macake, tb *Testbed, tr Trace, n int) []time.Duration {
	var lat []time.Duration
	base := AutoratePolicy(tr, config.LawMacake, Reflectors)
	for i := 0; i < n; i++ {
		kb := 100 + 10*(i%2) + 20*i
		text := strings.Replace(base, `queue = "auto"`, fmt.Sprintf(`queue = "%dKB"`, kb), 1)
		want := fmt.Sprintf("limit %dKb", kb)
		start := time.Now()
		if err := os.WriteFile(filepath.Join(m.ConfigDir, "bench.toml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		for {
			out, _ := tb.Client.ExecContext(context.Background(), nil, "tc", "qdisc", "show", "dev", ClientDev)
			if strings.Contains(out, want) {
				lat = append(lat, time.Since(start))
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("save %d: no %q within 10 s:\n%s", i, want, out)
			}
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
	}
	slices.Sort(lat)
	return lat
}

// TestWatchStartsNoProcessPerRateChange: under load the controller
// changes rates several times a second, and the daemon starts no process
// at all, drift checks included: every tc or ip it runs is counted by a
// logging wrapper, and rate changes and readings of the live state go over
// netlink.
func TestWatchStartsNoProcessPerRateChange(t *testing.T) {
	tr := Trace{Name: "constant", Steps: []Step{{Download: 50_000_000, Upload: 10_000_000}}, Length: time.Hour}
	tb := NewTestbed(t, "mknp", tr)
	tb.Client.DisableOffloads(ClientDev)
	m := NewMacake(t, macake(t), tb.Client, ClientDev, ispLAN)
	dir := t.TempDir()
	log := toolLog(filepath.Join(dir, "tools.log"))
	m.Env = append(m.Env, "MACAKE_TC="+log.wrap(t, dir, "tc"), "MACAKE_IP="+log.wrap(t, dir, "ip"))
	m.SetPolicy(t, "np", AutoratePolicy(tr, config.LawMacake, Reflectors))
	w := newWatchShaper(m, tb)
	// Three drift checks in the window below, not one every 30 s.
	w.Args = []string{"--drift-interval", "5s"}
	ctx := context.Background()
	load := startUnderLoad(ctx, t, w, tb)
	_, _, _, _, from := log.count(0)
	time.Sleep(15 * time.Second)
	all, _, _, reads, _ := log.count(from)
	load.Stop()
	if _, err := w.Stop(ctx); err != nil {
		t.Errorf("stopping watch: %v", err)
	}
	out := w.Output().Stdout + w.Output().Stderr
	changes := strings.Count(out, "event=cut") + strings.Count(out, `"event":"cut"`)
	if changes == 0 {
		t.Fatalf("no rate cut logged under load: the test proves nothing\n%s", out)
	}
	if all != 0 {
		f, _ := os.ReadFile(string(log))
		t.Fatalf("under load the daemon started %d processes (%d of them reads):\n%s", all, reads, f)
	}
	t.Logf("%d rate cuts logged; no process started in 15 s under load", changes)
}
