// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/shape"
	simtrace "github.com/macake/macake/sim/trace"
)

// Scenario is one run of the kernel testbed and of its simulated twin: a
// capacity trace replayed at the ISP and the load that crosses it.
type Scenario struct {
	// Spec is how it was named: NAME or NAME:upN.
	Spec string
	// Trace is the capacity schedule of one phase.
	Trace Trace
	// DownFlows and UpFlows are the bulk CUBIC flows of the load.
	DownFlows, UpFlows int
}

// Scenarios are the runs `make e2e` and the calibration table cover: a
// constant link, capacity steps, a Starlink-like wobble, a recorded LTE
// trace (from the shared traces; never copied into the repository), a
// second cellular trace from another source and recording campaign (the
// twin must agree with the kernel on links it was not built on, issue 24),
// and both directions loaded.
const Scenarios = "constant,steps,wobble,lte,train,wobble:up2"

// SharedTraces maps the names of recorded traces the scenarios use to
// their path under the shared traces directory, whose licences keep them
// out of the repository: lte is T-Mobile LTE recorded by mahimahi's
// Saturator at 1 ms, train NYU-METS's LTE on a New York subway train,
// iperf's TCP throughput at 1 s.
var SharedTraces = map[string]string{
	"lte":   "mahimahi/TMobile-LTE-short.down",
	"train": "nyu-mets/7Train2.csv",
}

// ReplayStep is how often the testbed changes the ISP's rate when it
// replays a recorded trace: one rate per 100 ms (mahimahi's delivery
// opportunities, rebinned).
const ReplayStep = 100 * time.Millisecond

// minTraceRate is the lowest rate a testbed trace holds (ParseTrace's
// floor): an htb class cannot run at zero, and a recorded outage becomes a
// trickle of 100 kbit/s.
const minTraceRate = 100_000

// errNoSharedTraces: a scenario names a recorded trace and the shared
// traces directory is not there (as in CI).
var errNoSharedTraces = errors.New("no shared traces directory (../shared/traces, or set MACAKE_TRACES)")

// ParseScenario reads NAME[:upN]: NAME is a trace of testdata/traces or a
// recorded trace (SharedTraces, or a path under the shared traces
// directory tracesDir); N upload flows (0–16) join the 4 download flows.
// The trace lasts length: a trace of a few steps is squeezed or stretched
// (its shape is the point), any other is cut.
func ParseScenario(spec, testdata, tracesDir string, length time.Duration, upFlows int) (Scenario, error) {
	name, ups, hasUp := strings.Cut(spec, ":up")
	sc := Scenario{Spec: spec, DownFlows: 4, UpFlows: upFlows}
	if hasUp {
		n, err := strconv.Atoi(ups)
		if err != nil || n < 0 || n > 16 {
			return sc, fmt.Errorf("scenario %q: want NAME or NAME:upN with N in 0-16", spec)
		}
		sc.UpFlows = n
	}
	var tr Trace
	local := filepath.Join(testdata, name+".csv")
	if _, err := os.Stat(local); err == nil {
		if tr, err = ReadTrace(local); err != nil {
			return sc, err
		}
	} else {
		rel := name
		if p, ok := SharedTraces[name]; ok {
			rel = p
		}
		if tracesDir == "" {
			return sc, fmt.Errorf("scenario %q: not in %s: %w", spec, testdata, errNoSharedTraces)
		}
		if tr, err = RecordedTrace(filepath.Join(tracesDir, rel), ReplayStep); err != nil {
			return sc, fmt.Errorf("scenario %q: %w", spec, err)
		}
		tr.Name = name
	}
	if len(tr.Steps) <= 4 {
		tr = tr.Scale(length)
	} else {
		tr = tr.Cut(length)
	}
	sc.Trace = tr
	return sc, nil
}

// RecordedTrace turns a recorded capacity trace (any file package
// sim/trace reads) into a testbed trace of one rate per step:
// its own direction from the file, the other from the paired mahimahi file
// (X.down ↔ X.up) when there is one, else constant at the recorded
// direction's mean. Rates below 100 kbit/s are raised to it.
func RecordedTrace(path string, step time.Duration) (Trace, error) {
	traces, err := simtrace.Load(path)
	if err != nil {
		return Trace{}, err
	}
	if len(traces) != 1 {
		return Trace{}, fmt.Errorf("%s holds %d traces; the testbed replays files with one", path, len(traces))
	}
	var dirs [2]*simtrace.Trace
	dirs[traces[0].Direction] = traces[0]
	if sib := simtrace.Sibling(path); sib != "" {
		if st, err := simtrace.Load(sib); err == nil && len(st) == 1 && st[0].Direction != traces[0].Direction {
			dirs[st[0].Direction] = st[0]
		}
	}
	var bins [2][]float64
	n := math.MaxInt
	for d, t := range dirs {
		if t == nil {
			continue
		}
		bins[d] = t.Bins(step)
		n = min(n, len(bins[d]))
	}
	if n == 0 || n == math.MaxInt {
		return Trace{}, errors.New(path + ": shorter than one step")
	}
	mean := traces[0].Mean()
	rate := func(d shape.Direction, i int) int64 {
		if bins[d] == nil {
			return max(int64(mean), minTraceRate)
		}
		return max(int64(math.Round(bins[d][i]/1e5))*1e5, minTraceRate)
	}
	tr := Trace{Name: traces[0].Name, Length: time.Duration(n) * step}
	for i := range n {
		tr.Steps = append(tr.Steps, Step{At: time.Duration(i) * step, Download: rate(shape.Download, i), Upload: rate(shape.Upload, i)})
	}
	return tr, nil
}
