// SPDX-License-Identifier: Apache-2.0

package simrun

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/autorate"
)

// spec is a request with the flags' defaults, as `macake sim` declares them.
func spec() Spec {
	return Spec{
		Duration: 6 * time.Second, Warmup: 2 * time.Second, ActuationDelay: 10 * time.Millisecond,
		Flows: 4, CC: "cubic", Queue: "auto", Phases: "auto", Seed: 1, Seeds: 5, Offsets: 3,
	}
}

// TestCheckNamesTheFlag: every rejection is a UsageError whose text names
// the flag as the user typed it; these texts are the CLI's.
func TestCheckNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Link, s.Trace = "dsl", "x" }, "give one of --link, --trace and --traces"},
		{func(s *Spec) { s.Flows = 0 }, "--flows 0: want 1–256 bulk TCP flows (the metrics are taken under load)"},
		{func(s *Spec) { s.Flows = 257 }, "--flows 257: want 1–256"},
		{func(s *Spec) { s.Duration = 25 * time.Hour }, "--duration 25h0m0s: want more than 0 and at most a day"},
		{func(s *Spec) { s.Warmup = -time.Second }, "--warmup -1s: want 0 or more"},
		{func(s *Spec) { s.Duration = time.Second }, "--duration 1s must be longer than the warm-up (2s)"},
		{func(s *Spec) { s.Duration = 2001 * time.Millisecond }, "--duration 2.001s with --warmup 2s measures only 1ms; want at least 2s after the warm-up"},
		{func(s *Spec) { s.Offset = -time.Second }, "--offset -1s: want 0 or more"},
		{func(s *Spec) { s.Buffer = time.Nanosecond }, "--buffer 1ns: want 10ms–1m of the mean capacity"},
		{func(s *Spec) { s.ActuationDelay = 11 * time.Second }, "--actuation-delay 11s: want 0 (none) to 10s"},
		{func(s *Spec) { s.ProbeBurst = 7 }, "--probe-burst 7: want 1"},
		{func(s *Spec) { s.BaseRTT = 11 * time.Second }, "--base-rtt 11s: want a positive RTT up to 10s"},
		{func(s *Spec) { s.Rebin = 10 * time.Millisecond }, "--rebin needs --trace and a positive step"},
		{func(s *Spec) { s.Trace, s.Rebin = "x", 1500*time.Microsecond }, "--rebin 1.5ms: want whole milliseconds"},
		{func(s *Spec) { s.Loss = "0.5" }, `--loss "0.5": want DOWN,UP, e.g. 0.0001,0.002`},
		{func(s *Spec) { s.Loss = "0, 1" }, `--loss "0, 1": " 1" is not a probability from 0 to below 1`},
		{func(s *Spec) { s.Seeds = 0 }, "--seeds and --offsets must be at least 1"},
		{func(s *Spec) { s.Direction = "sideways" }, `--direction "sideways": want both, download or upload`},
	} {
		s := spec()
		tc.edit(&s)
		err := s.Check()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.As(err, new(UsageError)) {
			t.Errorf("%+v: %v (%T); want a UsageError starting %q", s, err, err, tc.want)
		}
	}
}

// TestCheckSettlesDefaults: no link means the starlink model, and --loss
// is parsed into the download and upload probabilities.
func TestCheckSettlesDefaults(t *testing.T) {
	s := spec()
	s.Loss = "0.0001, 0.002"
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if s.Link != "starlink" || s.lossProb[shape.Download] != 0.0001 || s.lossProb[shape.Upload] != 0.002 {
		t.Errorf("link %q, loss %v", s.Link, s.lossProb)
	}
	if err := s.Check(); err != nil || s.Link != "starlink" {
		t.Errorf("a second Check: %v, link %q", err, s.Link)
	}
}

func TestArms(t *testing.T) {
	a, err := arms(" none,fixed,none,,upstream+CutToAchieved ")
	if err != nil || armNames(a) != "none, fixed, upstream+CutToAchieved" {
		t.Errorf("arms: %q, %v", armNames(a), err)
	}
	if _, err := arms("magic"); err == nil || !strings.Contains(err.Error(), `--controllers: unknown controller "magic"; available: none, fixed,`) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := arms(" , "); err == nil || err.Error() != "--controllers: name at least one controller" {
		t.Errorf("empty: %v", err)
	}
	for _, list := range []string{DefaultControllers(), benchControllers} {
		if _, err := arms(list); err != nil {
			t.Errorf("%s: %v", list, err)
		}
	}
}

// TestPhasesArm: auto prefers the policy's controller, then ours, then
// upstream, then an oracle; none and an unknown name pick nothing.
func TestPhasesArm(t *testing.T) {
	named := func(names ...string) []sim.Arm {
		var a []sim.Arm
		for _, n := range names {
			a = append(a, sim.Arm{Name: n})
		}
		return a
	}
	for _, tc := range []struct {
		phases string
		arms   []sim.Arm
		want   string // "" for none
	}{
		{"auto", named("none", "ours", "upstream", "policy"), "policy"},
		{"auto", named("oracle", "upstream", "ours"), "ours"},
		{"auto", named("oracle", "oracle-lag0.5"), "oracle-lag0.5"},
		{"auto", named("none", "fixed"), ""},
		{"none", named("ours"), ""},
		{"fixed", named("none", "fixed"), "fixed"},
		{"ours", named("none"), ""},
	} {
		a, ok := phasesArm(tc.phases, tc.arms)
		if ok != (tc.want != "") || a.Name != tc.want {
			t.Errorf("phasesArm(%s, %s) = %q, %v; want %q", tc.phases, armNames(tc.arms), a.Name, ok, tc.want)
		}
	}
}

// TestNewSingleFindsEveryProblemBeforeRunning: the errors a run can only
// meet late (a trace's length, the phases' arm, the policy file) come from
// NewSingle, classified, before any simulation.
func TestNewSingleFindsEveryProblemBeforeRunning(t *testing.T) {
	for _, tc := range []struct {
		edit   func(*Spec)
		usage  bool
		config bool
		want   string
	}{
		{func(s *Spec) { s.Trace, s.Rebin = "../trace/testdata/step.down", time.Hour }, true, false, "--rebin 1h0m0s: the download trace lasts"},
		{func(s *Spec) { s.Controllers, s.Phases = "none", "ours" }, true, false, "--phases ours: not among the controllers run (none)"},
		{func(s *Spec) { s.Controllers = "none,policy" }, true, false, "--controllers policy: needs --policy FILE (and one link)"},
		{func(s *Spec) { s.Queue = "2MB" }, true, false, "above dnctl's limit"},
		{func(s *Spec) { s.Policy = "no-such.toml" }, false, true, "no-such.toml"},
		{func(s *Spec) { s.Link = "wifi" }, true, false, `--link wifi: unknown link model "wifi"`},
	} {
		s := spec()
		tc.edit(&s)
		_, err := NewSingle(s)
		if err == nil || !strings.Contains(err.Error(), tc.want) ||
			errors.As(err, new(UsageError)) != tc.usage || errors.As(err, new(ConfigError)) != tc.config {
			t.Errorf("%+v: %v (%T); want %q (usage %v, config %v)", s, err, err, tc.want, tc.usage, tc.config)
		}
	}
}

// TestSingleDescribesItsSetup: the title says the link, the load and the
// pipe as the run will have them, the trace's own direction included.
func TestSingleDescribesItsSetup(t *testing.T) {
	s := spec()
	s.Link, s.Controllers = "dsl", "none,fixed,oracle"
	r, err := NewSingle(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Title(), "dsl (built-in model, seed 1) · 6s · 4 download + 4 upload CUBIC flows · buffer 1s of mean capacity · base RTT "; !strings.HasPrefix(got, want) || !strings.HasSuffix(got, " · pipe queue auto · actuation 10ms") {
		t.Errorf("title %q", got)
	}
	if r.PhaseArm == nil || r.PhaseArm.Name != "oracle" || len(r.jobs) != 4 || r.jobs[3].Options.Duration != 90*time.Second {
		t.Errorf("phases: %+v, %d jobs", r.PhaseArm, len(r.jobs))
	}

	s = spec()
	s.Trace, s.Controllers, s.Phases = "../trace/testdata/step.down", "none", "none"
	if r, err = NewSingle(s); err != nil {
		t.Fatal(err)
	}
	if got := r.SVGTitle(); !strings.HasSuffix(got, "step.down (trace): 4 download CUBIC flows, 6s") {
		t.Errorf("svg title %q", got)
	}
	if r.PhaseArm != nil || len(r.jobs) != 1 {
		t.Errorf("--phases none: %+v, %d jobs", r.PhaseArm, len(r.jobs))
	}
}

// TestDocumentLeavesTheSeriesOut: the JSON drops the time series, and the
// outcome keeps them for the SVG written beside it.
func TestDocumentLeavesTheSeriesOut(t *testing.T) {
	s := spec()
	s.Link, s.Controllers, s.Phases = "dsl", "none", "none"
	r, err := NewSingle(s)
	if err != nil {
		t.Fatal(err)
	}
	out := Outcome{Results: []*sim.Result{{Controller: "none", Series: &sim.Series{}}}}
	doc := r.Document(out)
	if doc.Setup != r.Title() || len(doc.Results) != 1 || doc.Results[0].Series != nil || doc.Results[0].Controller != "none" || doc.Phases != nil {
		t.Errorf("document %+v", doc)
	}
	if out.Results[0].Series == nil {
		t.Error("Document dropped the outcome's own series")
	}
}

func TestNewBench(t *testing.T) {
	s := spec()
	s.Traces, s.Policy = t.TempDir(), "x.toml"
	if _, err := NewBench(s); !errors.As(err, new(UsageError)) || !strings.Contains(err.Error(), "every trace takes its own") {
		t.Errorf("--policy with --traces: %v", err)
	}
	src, err := os.ReadFile("../trace/testdata/step.down")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.Traces, "mahimahi"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Traces, "mahimahi", "step.down"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	s.Policy = ""
	b, err := NewBench(s)
	if err != nil {
		t.Fatal(err)
	}
	// The candidates of the leave-one-source-out estimate run after the
	// controllers, each once.
	grid := TuningGrid()
	want := strings.ReplaceAll(benchControllers+","+strings.Join(grid, ","), ",", ", ")
	if got := armNames(b.Config.Arms); got != want || len(b.Cases) != 1 || b.Runs() != 1*(7+len(grid))*5*3 || b.Config.Flows != 4 || len(b.Candidates) != len(grid) {
		t.Errorf("arms %s, %d runs, candidates %v", got, b.Runs(), b.Candidates)
	}
	for _, tc := range []struct{ list, want string }{
		{"none", ""},
		{"upstream+CutToAchieved", "upstream+CutToAchieved"},
		{"ours,grid", "ours," + strings.Join(grid, ",")},
	} {
		s.Candidates = tc.list
		b, err := NewBench(s)
		if err != nil || strings.Join(b.Candidates, ",") != tc.want {
			t.Errorf("--candidates %s: %v, %v", tc.list, b, err)
		}
	}
	s.Candidates = "fixed"
	if _, err := NewBench(s); !errors.As(err, new(UsageError)) || !strings.Contains(err.Error(), "not an autorate controller") {
		t.Errorf("--candidates fixed: %v", err)
	}
	s.Candidates = ""
	s.Traces = "/no/such/dir"
	if _, err := NewBench(s); err == nil || errors.As(err, new(UsageError)) {
		t.Errorf("missing directory: %v; want a plain error", err)
	}
}

// TestTuningGrid: the grid is every combination of its knobs, each point a
// valid variant, and macake's law as users run it is exactly one of them
// (the one the leave-one-source-out tuning chose).
func TestTuningGrid(t *testing.T) {
	grid := TuningGrid()
	if len(grid) != 3*3*2*2 {
		t.Fatalf("%d grid points, want 36", len(grid))
	}
	env := &sim.Env{Bounds: [2]sim.Bounds{{Min: 1e6, Base: 2e6, Max: 4e6}, {Min: 1e6, Base: 2e6, Max: 4e6}}}
	ours := autorate.OursConfig(env)
	seen := map[string]bool{}
	matches := 0
	for _, p := range grid {
		if seen[p] {
			t.Errorf("%s twice", p)
		}
		seen[p] = true
		tw, err := autorate.ParseTweak(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		cfg := autorate.OursConfig(env)
		if err := tw.Apply(&cfg); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if reflect.DeepEqual(cfg, ours) {
			matches++
		}
	}
	if matches != 1 {
		t.Errorf("macake's law is %d points of the grid, want exactly one", matches)
	}
}
