// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/execrun"
	simtrace "github.com/macake/macake/sim/trace"
)

var (
	buildOnce sync.Once
	macakeBin string
)

// macake builds macake once per test binary, unless -e2e.macake names
// one.
func macake(t *testing.T) string {
	t.Helper()
	if *macakeFlag != "" {
		return *macakeFlag
	}
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

// cleanupBinary removes the macake built for this test binary.
func cleanupBinary() {
	if macakeBin != "" {
		os.RemoveAll(filepath.Dir(macakeBin))
	}
}

func init() { afterTests = append(afterTests, cleanupBinary) }

// TestOffOnOff is the end-to-end proof on a real kernel: real CUBIC TCP
// through a bloated ISP bottleneck whose capacity follows a trace, with an
// independent probe that macake does not exempt. Unshaped, macake watch
// under upstream's law, under macake's, the oracle, and unshaped again on
// the same trace segment (drift control); macake's shaped phase must at
// least halve the added p90 delay and keep at least half of the goodput.
// The rest (how ours compares with upstream and the oracle) is measured,
// not asserted: -e2e.report and -e2e.json record it for
// docs/MEASUREMENTS.md and the calibration table.
func TestOffOnOff(t *testing.T) {
	for _, spec := range strings.Split(*traceNames, ",") {
		t.Run(spec, func(t *testing.T) { offOnOff(t, spec) })
	}
}

// The phases of a run, in order, by the arm names of the calibration.
var phaseNames = map[string]string{
	ArmUpstream: `macake watch, controller = "upstream"`,
	ArmOurs:     "macake watch (macake's law)",
	ArmOracle:   fmt.Sprintf("oracle (%g·C(t), %v queue)", OracleShare, OracleQueue),
}

func offOnOff(t *testing.T, spec string) {
	sc, err := ParseScenario(spec, filepath.Join("testdata", "traces"), simtrace.SharedDir("."), *phaseLength, *upFlows)
	if err != nil {
		if errors.Is(err, errNoSharedTraces) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if *rateScale != 1 {
		sc.Trace = sc.Trace.ScaleRates(*rateScale)
		sc.Spec = fmt.Sprintf("%s ×%g", spec, *rateScale)
	}
	tr := sc.Trace
	tb := NewTestbed(t, "e2e", tr)
	ctx := context.Background()
	cfg := PhaseConfig{Idle: *idleLength, DownFlows: sc.DownFlows, UpFlows: sc.UpFlows, LostDelay: LostDelay}

	run := Run{Trace: tr}
	var measures []Measure
	phase := func(arm, name string, s Shaper) {
		t.Helper()
		ph, err := tb.RunPhase(ctx, name, s, tr, cfg)
		if err != nil {
			t.Fatalf("phase %q: %v", name, err)
		}
		t.Logf("%s: goodput %.2f Mbit/s, idle p50 %v, loaded p50 %v p90 %v, lost %d/%d", name, ph.Goodput/1e6,
			ph.Idle.P50, ph.Loaded.P50, ph.Loaded.P90, ph.Loaded.Lost, ph.Loaded.Samples+ph.Loaded.Lost)
		run.Phases = append(run.Phases, ph)
		measures = append(measures, KernelMeasure(sc, arm, ph))
		if *seriesDir != "" {
			n := seriesName(spec, arm)
			if name == "off again" {
				n += "-again"
			}
			writeSeries(t, *seriesDir, n, ph)
		}
	}
	// Each law gets its own state directory, so that neither starts from
	// the rates the other left as known-good.
	watches := map[string]*WatchShaper{}
	for _, law := range []struct {
		arm string
		law config.ControlLaw
	}{{ArmUpstream, config.LawUpstream}, {ArmOurs, config.LawMacake}} {
		m := NewMacake(t, macake(t), tb.Client, ClientDev, ispLAN)
		m.SetPolicy(t, "e2e", AutoratePolicy(tr, law.law, Reflectors))
		watches[law.arm] = newWatchShaper(m, tb)
		if *seriesDir != "" {
			watches[law.arm].Args = []string{"--log-level", "debug", "--log-file", filepath.Join(*seriesDir, seriesName(spec, law.arm)+".log")}
		}
	}
	phase(ArmOff, "off", nil)
	phase(ArmUpstream, phaseNames[ArmUpstream], watches[ArmUpstream])
	phase(ArmOurs, phaseNames[ArmOurs], watches[ArmOurs])
	oracle := phaseNames[ArmOracle]
	if clientShaper() == "cake" {
		oracle = fmt.Sprintf("oracle (%g·C(t), CAKE's queue)", OracleShare)
	}
	phase(ArmOracle, oracle, &OracleShaper{NS: tb.Client, Trace: tr})
	phase(ArmOff, "off again", nil)
	if *withFixed {
		m := NewMacake(t, macake(t), tb.Client, ClientDev, ispLAN)
		fixedDown, fixedUp := tr.Mean(true)*9/10, tr.Mean(false)*9/10
		m.SetPolicy(t, "e2e", FixedPolicy(fixedDown, fixedUp))
		phase("fixed", fmt.Sprintf("fixed %.1f/%.1f Mbit/s (macake apply)", float64(fixedDown)/1e6, float64(fixedUp)/1e6), ApplyShaper{m})
	}

	t.Logf("congestion control on the load sockets: %v", tb.Congestion())
	for _, cc := range tb.Congestion() {
		if !strings.HasSuffix(cc, " cubic") {
			t.Errorf("load socket with %s: BBR or another would hide the bloat", cc)
		}
	}
	on := phaseNames[ArmOurs]
	var table strings.Builder
	if err := run.WriteTable(&table, on); err != nil {
		t.Fatal(err)
	}
	WriteScores(&table, measures)
	t.Logf("\n%s", table.String())
	if *reportFile != "" {
		appendReport(t, sc.Spec, table.String(), cfg)
	}
	if *jsonFile != "" {
		appendMeasures(t, *jsonFile, measures)
	}

	if *measureOnly {
		if v, err := run.Compare(on); err == nil {
			t.Logf("%s: added p90 %.2f× the unshaped, goodput %.2f× (measured, not asserted: -e2e.measure-only)", on, v.P90Ratio, v.GoodputKept)
		}
	} else {
		meetsTheBar(t, run, on)
	}
	if t.Failed() {
		for arm, w := range watches {
			t.Logf("macake watch (%s) output:\n%s", arm, w.Output())
		}
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

var (
	shaperOnce sync.Once
	shaperKind string
)

// clientShaper is what the tc backend shapes the client with on this
// kernel: "htb+bfifo" on our machines, "cake" in a cakevm guest (`make
// e2e-cake`).
func clientShaper() string {
	shaperOnce.Do(func() {
		shaperKind = tc.Probe(context.Background(), execrun.Exec{Timeout: 30 * time.Second}, tc.DefaultTools()).Shaper()
	})
	return shaperKind
}

// appendReport adds one run's table to the -e2e.report file.
func appendReport(t *testing.T, name, table string, cfg PhaseConfig) {
	t.Helper()
	f, err := os.OpenFile(*reportFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "#### %s\n\n%d CUBIC download flows, %d upload; each phase %s idle, then %s loaded; the client shaped with %s.\n\n%s\n",
		name, cfg.DownFlows, cfg.UpFlows, *idleLength, *phaseLength, clientShaper(), table)
}

// newWatchShaper runs macake watch; it is ready once macake's root qdisc
// is on the client's interface.
func newWatchShaper(m *Macake, tb *Testbed) *WatchShaper {
	return &WatchShaper{M: m, Ready: func(ctx context.Context) bool {
		out, err := tb.Client.ExecContext(ctx, nil, "tc", "qdisc", "show", "dev", ClientDev)
		return err == nil && strings.Contains(out, "4d4b:")
	}}
}

// startUnderLoad starts watch, gives its controller 3 s to learn the idle
// baselines, then puts 4 download and 2 upload flows on the testbed; the
// caller stops them.
func startUnderLoad(ctx context.Context, t *testing.T, w *WatchShaper, tb *Testbed) *Load {
	t.Helper()
	w.StartFor(t)
	time.Sleep(3 * time.Second)
	load, err := tb.StartLoad(ctx, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	return load
}

// TestPoliciesAreValid: the policies the e2e runs with, and the shipped
// Linux example, pass validation for Linux without warnings, and the
// autorate ones probe the reflectors they were given; on macOS the
// example's [cake] table is warned about, key by key.
func TestPoliciesAreValid(t *testing.T) {
	tr := StarlinkLike(1, 30*time.Second)
	for name, c := range map[string]struct {
		text       string
		reflectors []string
	}{
		"fixed":         {FixedPolicy(tr.Mean(true)*9/10, tr.Mean(false)*9/10), Reflectors},
		"autorate":      {AutoratePolicy(tr, config.LawMacake, Reflectors), Reflectors},
		"upstream":      {AutoratePolicy(tr, config.LawUpstream, Reflectors), Reflectors},
		"autorate-auto": {AutoratePolicy(tr, config.LawMacake, autoReflectors(Reflectors, 443)), autoReflectors(Reflectors, 443)},
		"autorate-tcp":  {AutoratePolicy(tr, config.LawMacake, tcpReflectors(Reflectors, 443)), tcpReflectors(Reflectors, 443)},
	} {
		pol, warnings, err := config.Parse("links.d/"+name+".toml", []byte(c.text), config.LoadOptions{Target: config.TargetLinux})
		if err != nil || len(warnings) != 0 {
			t.Errorf("%s policy: %v, warnings %v\n%s", name, err, warnings, c.text)
			continue
		}
		var got []string
		for _, r := range pol.Autorate.Reflectors {
			got = append(got, r.String())
		}
		if !slices.Equal(got, c.reflectors) {
			t.Errorf("%s policy probes %v, want %v", name, got, c.reflectors)
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
