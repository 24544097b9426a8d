// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/config"
)

var (
	phaseLength = flag.Duration("e2e.phase", 15*time.Second, "loaded length of each phase (the trace is cut or squeezed to it)")
	traceNames  = flag.String("e2e.traces", "steps", "comma-separated traces from testdata/traces to run off/on/off on; NAME:upN adds N upload flows to that run")
	reportFile  = flag.String("e2e.report", "", "append the Markdown tables to this file")
	idleLength  = flag.Duration("e2e.idle", 3*time.Second, "idle window of each phase (the controller's warm-up)")
	upFlows     = flag.Int("e2e.up", 0, "upload flows besides the 4 download flows (every run without :upN)")
)

var (
	buildOnce sync.Once
	macakeBin string
)

// macake builds macake once per test binary.
func macake(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "macake-e2e-bin-")
		if err != nil {
			t.Fatal(err)
		}
		macakeBin = BuildMacake(t, dir)
	})
	if macakeBin == "" {
		t.Fatal("building macake failed earlier")
	}
	return macakeBin
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if macakeBin != "" {
		os.RemoveAll(filepath.Dir(macakeBin))
	}
	os.Exit(code)
}

// phaseTrace returns the named trace at the phase length: a step trace is
// squeezed (its shape is the point), any other is cut.
func phaseTrace(t *testing.T, name string) Trace {
	t.Helper()
	tr, err := ReadTrace(filepath.Join("testdata", "traces", name+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Steps) <= 4 {
		return tr.Scale(*phaseLength)
	}
	return tr.Cut(*phaseLength)
}

// fixedPolicy shapes at rate with a queue of 10 ms at that rate (the
// calibration setup of reference/benchmark.md §6.4(e)).
func fixedPolicy(down, up int64) string {
	return fmt.Sprintf(`description = "e2e: fixed shaper"
[match]
interface = %q
[shaper]
mode = "fixed"
download = "%dkbit"
upload = "%dkbit"
queue = "%dB"
[autorate]
reflectors = [%s]
`, ClientDev, down/1000, up/1000, max(down/800, 6056), quoted(Reflectors))
}

func quoted(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// TestOffOnOff is the end-to-end proof on a real kernel: real CUBIC TCP
// through a bloated ISP bottleneck whose capacity follows a trace, with an
// independent probe that macake does not exempt. Unshaped, shaped, and
// unshaped again on the same trace segment (drift control); the shaped
// phase must at least halve the added p90 delay and keep at least half of
// the goodput.
func TestOffOnOff(t *testing.T) {
	for _, name := range strings.Split(*traceNames, ",") {
		t.Run(name, func(t *testing.T) { offOnOff(t, name) })
	}
}

func offOnOff(t *testing.T, spec string) {
	name, ups, _ := strings.Cut(spec, ":up")
	up := *upFlows
	if ups != "" {
		n, err := strconv.Atoi(ups)
		if err != nil || n < 0 || n > 16 {
			t.Fatalf("-e2e.traces: %q: want NAME or NAME:upN with N in 0-16", spec)
		}
		up = n
	}
	tr := phaseTrace(t, name)
	tb := NewTestbed(t, "e2e", tr)
	m := NewMacake(t, macake(t), tb.Client, ClientDev, ispLAN)
	ctx := context.Background()
	cfg := PhaseConfig{Idle: *idleLength, DownFlows: 4, UpFlows: up}

	fixedDown, fixedUp := tr.Mean(true)*9/10, tr.Mean(false)*9/10
	fixedName := fmt.Sprintf("fixed %.1f/%.1f Mbit/s (macake apply)", float64(fixedDown)/1e6, float64(fixedUp)/1e6)
	run := Run{Trace: tr}
	phase := func(name string, s Shaper) {
		t.Helper()
		ph, err := tb.RunPhase(ctx, name, s, tr, cfg)
		if err != nil {
			t.Fatalf("phase %q: %v", name, err)
		}
		t.Logf("%s: goodput %.2f Mbit/s, idle p50 %v, loaded p50 %v p90 %v, lost %d/%d", name, ph.Goodput/1e6,
			ph.Idle.P50, ph.Loaded.P50, ph.Loaded.P90, ph.Loaded.Lost, ph.Loaded.Samples+ph.Loaded.Lost)
		run.Phases = append(run.Phases, ph)
	}
	// The shaped phase is macake watch; a fixed-rate macake apply is the
	// reference row after the drift-controlled three.
	const on = "macake watch (autorate)"
	watch := newWatchShaper(m, tb)
	phase("off", nil)
	m.SetPolicy(t, "e2e", autoratePolicy(tr))
	phase(on, watch)
	phase("off again", nil)
	m.SetPolicy(t, "e2e", fixedPolicy(fixedDown, fixedUp))
	phase(fixedName, ApplyShaper{m})

	t.Logf("congestion control on the load sockets: %v", tb.Congestion())
	for _, cc := range tb.Congestion() {
		if !strings.HasSuffix(cc, " cubic") {
			t.Errorf("load socket with %s: BBR or another would hide the bloat", cc)
		}
	}
	var table strings.Builder
	if err := run.WriteTable(&table, on); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if *reportFile != "" {
		appendReport(t, spec, table.String(), cfg)
	}

	meetsTheBar(t, run, on)
	if t.Failed() {
		t.Logf("macake watch's output:\n%s", watch.Output())
	}
}

// meetsTheBar checks the shaped phase named on against the run's unshaped
// phases: the testbed made bufferbloat (an added p90 of 200 ms or more),
// and the phase at least halved the added p90 and kept at least half of
// the goodput. It returns the comparison.
func meetsTheBar(t *testing.T, run Run, on string) Verdict {
	t.Helper()
	v, err := run.Compare(on)
	if err != nil {
		t.Fatal(err)
	}
	if v.OffAdded.P90 < 200*time.Millisecond {
		t.Errorf("unshaped added p90 is only %v: the testbed did not create bufferbloat (BBR? offloads?)", v.OffAdded.P90)
	}
	if v.P90Ratio > 0.5 {
		t.Errorf("%s: added p90 %v is more than half of the unshaped %v", on, v.OnAdded.P90, v.OffAdded.P90)
	}
	if v.GoodputKept < 0.5 {
		t.Errorf("%s: goodput %.2f Mbit/s is less than half of the unshaped %.2f Mbit/s", on, v.OnGoodput/1e6, v.OffGoodput/1e6)
	}
	return v
}

// appendReport adds one run's table to the -e2e.report file.
func appendReport(t *testing.T, name, table string, cfg PhaseConfig) {
	t.Helper()
	f, err := os.OpenFile(*reportFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "#### %s\n\n%d CUBIC download flows, %d upload; each phase %s idle, then %s loaded.\n\n%s\n",
		name, cfg.DownFlows, cfg.UpFlows, *idleLength, *phaseLength, table)
}

// newWatchShaper runs macake watch; it is ready once macake's root qdisc
// is on the client's interface.
func newWatchShaper(m *Macake, tb *Testbed) *WatchShaper {
	return &WatchShaper{M: m, Ready: func(ctx context.Context) bool {
		out, err := tb.Client.ExecContext(ctx, nil, "tc", "qdisc", "show", "dev", ClientDev)
		return err == nil && strings.Contains(out, "4d4b:")
	}}
}

// autoratePolicy is the policy watch runs with on a trace: it starts at
// 90 % of the trace's mean and may range from 5 Mbit/s (2 up) to 20 %
// above the trace's peak, probing the six reflectors (the default 20 Hz);
// every other key is cake-autorate's default.
func autoratePolicy(tr Trace) string {
	return fmt.Sprintf(`description = "e2e: autorate"
[match]
interface = %q
[shaper]
mode = "autorate"
download = "%dkbit"
upload = "%dkbit"
queue = "auto"
[autorate]
download = { min = "5mbit", max = "%dkbit" }
upload = { min = "2mbit", max = "%dkbit" }
reflectors = [%s]
`, ClientDev, tr.Mean(true)*9/10000, tr.Mean(false)*9/10000, tr.Max(true)*12/10000, tr.Max(false)*12/10000, quoted(Reflectors))
}

// TestPoliciesAreValid: the policies the e2e runs with, and the shipped
// Linux example, pass validation for Linux without warnings; on macOS the
// example's [cake] table is warned about, key by key.
func TestPoliciesAreValid(t *testing.T) {
	tr := StarlinkLike(1, 30*time.Second)
	for name, text := range map[string]string{"fixed": fixedPolicy(tr.Mean(true)*9/10, tr.Mean(false)*9/10), "autorate": autoratePolicy(tr)} {
		_, warnings, err := config.Parse("links.d/"+name+".toml", []byte(text), config.LoadOptions{Target: config.TargetLinux})
		if err != nil || len(warnings) != 0 {
			t.Errorf("%s policy: %v, warnings %v\n%s", name, err, warnings, text)
		}
	}
	opts := config.LoadOptions{Target: config.TargetLinux, SkipOwnershipCheck: true}
	links, warnings, err := config.Load("../examples/linux/links.d", opts)
	if err != nil || len(warnings) != 0 || len(links) != 1 || links[0].Name != "router" {
		t.Fatalf("examples/linux/links.d: %v, %v, warnings %v", links, err, warnings)
	}
	opts.Target = config.TargetDarwin
	_, warnings, _ = config.Load("../examples/linux/links.d", opts)
	if len(warnings) != 1 || !strings.Contains(warnings[0].String(), "cake.egress_isolation, cake.ingress_isolation, cake.nat, cake.diffserv, cake.ack_filter") {
		t.Errorf("the router example on macOS: warnings %v", warnings)
	}
}
