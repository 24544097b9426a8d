// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/sim"
	simtrace "github.com/macake/macake/sim/trace"
)

var (
	calibrate   = flag.Bool("e2e.calibrate", false, "run the simulated twin of every -e2e.traces scenario and print the calibration table")
	kernelFile  = flag.String("e2e.kernel", "", "with -e2e.calibrate: the -e2e.json file of a kernel run, to compare with")
	simSeeds    = flag.Int("e2e.seeds", 5, "with -e2e.calibrate: simulator seeds per scenario")
	calibReport = flag.String("e2e.calibration", "", "with -e2e.calibrate: write the table to this file too")
	lawQueue    = flag.String("e2e.queue", "", "with -e2e.calibrate: the queue rule of the laws' pipes in the twin (sim --queue syntax; default the daemon's auto)")
	probeBurst  = flag.Int("e2e.burst", 0, "with -e2e.calibrate: probes the twin's prober sends at once (default as watch's: 2 of its 6 reflectors every 100 ms; 6 the rounds it sent before, 1 as cake-autorate)")
	variants    = flag.String("e2e.variants", "", "with -e2e.calibrate: comma-separated variants to simulate besides the laws, e.g. ours+PlateauHold,upstream+CutToAchieved")
)

// TestCalibration runs the simulator's twin of the kernel scenarios (same
// traces, loads, policies and oracle; see SimOptions) and, given the
// measures of a kernel run (-e2e.kernel), prints both side by side with
// the simulator's disagreement. It needs no root: `make calibrate`.
func TestCalibration(t *testing.T) {
	if !*calibrate {
		t.Skip("run with -e2e.calibrate (make calibrate)")
	}
	var kernel []Measure
	if *kernelFile != "" {
		f, err := os.Open(*kernelFile)
		if err != nil {
			t.Fatal(err)
		}
		kernel, err = ReadMeasures(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", *kernelFile, err)
		}
	}
	var simulated []Measure
	for _, spec := range strings.Split(*traceNames, ",") {
		sc, err := ParseScenario(spec, filepath.Join("testdata", "traces"), simtrace.SharedDir("."), *phaseLength, *upFlows)
		if errors.Is(err, errNoSharedTraces) {
			t.Logf("%s: skipped: %v", spec, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var vs []string
		if *variants != "" {
			vs = strings.Split(*variants, ",")
		}
		if *lawQueue != "" {
			q, err := sim.ParseQueueRule(*lawQueue)
			if err != nil {
				t.Fatal(err)
			}
			LawQueue = q
		}
		ProbeBurst = *probeBurst
		ms, err := Simulate(sc, *idleLength, *simSeeds, vs...)
		if err != nil {
			t.Fatal(err)
		}
		simulated = append(simulated, ms...)
	}
	var b strings.Builder
	b.WriteString("Simulated twin (" + time.Duration(*phaseLength).String() + " phases, medians of the seeds):\n")
	WriteScores(&b, simulated)
	if kernel != nil {
		b.WriteString("\nKernel against simulator:\n\n")
		WriteCalibration(&b, kernel, simulated)
	}
	t.Logf("\n%s", b.String())
	if *calibReport != "" {
		if err := os.WriteFile(*calibReport, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSimulatedTwin: the twin of a short steps scenario runs every arm,
// and shaping cuts the added delay of the unshaped link.
func TestSimulatedTwin(t *testing.T) {
	sc, err := ParseScenario("steps", filepath.Join("testdata", "traces"), "", 6*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Simulate(sc, time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Measure{}
	for _, m := range ms {
		got[m.Controller] = m
	}
	for _, arm := range []string{ArmOff, ArmUpstream, ArmOurs, ArmOracle} {
		if _, ok := got[arm]; !ok {
			t.Fatalf("no %s arm in %+v", arm, ms)
		}
	}
	off := got[ArmOff]
	if off.P90 < 200 || off.U < 0.5 {
		t.Errorf("unshaped twin: U %.2f, added p90 %.0f ms; want a bloated, busy link", off.U, off.P90)
	}
	for _, arm := range []string{ArmUpstream, ArmOurs, ArmOracle} {
		if m := got[arm]; m.P90 > off.P90/2 || m.Score <= off.Score {
			t.Errorf("%s: added p90 %.0f ms, score %.3f; unshaped %.0f ms, %.3f", arm, m.P90, m.Score, off.P90, off.Score)
		}
	}
}
