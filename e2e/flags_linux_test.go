// SPDX-License-Identifier: Apache-2.0

package e2e

// The flags and helpers only the real-kernel tests (Linux) use.

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	reportFile  = flag.String("e2e.report", "", "append the Markdown tables to this file")
	jsonFile    = flag.String("e2e.json", "", "append every phase's measures to this file, one JSON object a line (what the calibration table reads)")
	seriesDir   = flag.String("e2e.series", "", "write every phase's probe round trips (SCENARIO-ARM.csv) and watch's debug log (SCENARIO-ARM.log) to this directory")
	macakeFlag  = flag.String("e2e.macake", "", "the macake binary to run (default: built from this tree once per test binary; in a cakevm guest, where building is 20-35× slower, the make targets build it on the host)")
	rateScale   = flag.Float64("e2e.rate-scale", 1, "multiply every scenario's capacities by this (0.4 makes the constant 50/10 Mbit/s trace 20/4), for a testbed that cannot carry the originals (a cakevm guest)")
	measureOnly = flag.Bool("e2e.measure-only", false, "report the off/on/off tables without asserting the bar on them (`make e2e-cake`: no delay is asserted inside a guest whose CPU is 20-35× slower)")
	withFixed   = flag.Bool("e2e.fixed", false, "add a fixed-rate macake apply at 90 % of the trace's mean after the drift-controlled phases")
)

// writeSeries writes a phase's probe series to dir/NAME.csv: seconds since
// the load started, and the round trip in ms (empty when lost).
func writeSeries(t *testing.T, dir, name string, p Phase) {
	t.Helper()
	var b strings.Builder
	b.WriteString("seconds,rtt_ms\n")
	for i, at := range p.SeriesAt {
		rtt := ""
		if r := p.SeriesRTT[i]; r > 0 {
			rtt = strconv.FormatFloat(float64(r)/float64(time.Millisecond), 'f', 3, 64)
		}
		fmt.Fprintf(&b, "%.3f,%s\n", at.Seconds(), rtt)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// seriesName is the file name of a scenario's arm in -e2e.series.
func seriesName(scenario, arm string) string {
	return strings.NewReplacer(":", "-", "/", "-").Replace(scenario) + "-" + arm
}

// appendMeasures adds measures to path, one JSON object a line.
func appendMeasures(t *testing.T, path string, measures []Measure) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, m := range measures {
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
}
