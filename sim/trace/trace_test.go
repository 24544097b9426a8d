// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/shape"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestMahimahiBinsAndLoop(t *testing.T) {
	tr, err := Load("testdata/step.down")
	if err != nil {
		t.Fatal(err)
	}
	if tr[0].Direction != shape.Download || tr[0].Period() != 4*time.Second {
		t.Fatalf("direction %v period %v, want download and 4s", tr[0].Direction, tr[0].Period())
	}
	bins := tr[0].Bins(time.Second)
	want := []float64{12e6, 12e6, 6e6, 6e6}
	if len(bins) != len(want) {
		t.Fatalf("bins %v, want %v", bins, want)
	}
	for i := range want {
		if !near(bins[i], want[i], 1) {
			t.Errorf("bin %d = %.0f bit/s, want %.0f", i, bins[i], want[i])
		}
	}
	if m := tr[0].Mean(); !near(m, 9e6, 1) {
		t.Errorf("mean %.0f, want 9e6", m)
	}
}

// TestActivePercentileSkipsOutages: bins below a tenth of the mean do not
// drag the percentiles (a controller's bounds) down to zero.
func TestActivePercentileSkipsOutages(t *testing.T) {
	tr := &Trace{Name: "t", Step: time.Second, Rates: []int64{0, 0, 0, 0, 10e6, 20e6, 30e6, 40e6}}
	if p := tr.Percentile(25); p > 1 {
		t.Fatalf("setup: plain p25 %v, want 0", p)
	}
	if got, want := tr.ActivePercentile(0), 10e6; got != want {
		t.Errorf("active p0 %v, want %v", got, want)
	}
	if got, want := tr.ActivePercentile(100), 40e6; got != want {
		t.Errorf("active p100 %v, want %v", got, want)
	}
	// All outage (a single spike above a tenth of the mean is no outage).
	flat := &Trace{Name: "f", Step: time.Second, Rates: []int64{1, 1, 1, 1}}
	if got := flat.ActivePercentile(50); got != 1 {
		t.Errorf("flat trace: active p50 %v, want 1", got)
	}
}

func TestMahimahiSeveralPacketsPerMillisecond(t *testing.T) {
	tr, err := Load("testdata/burst.up")
	if err != nil {
		t.Fatal(err)
	}
	if tr[0].Direction != shape.Upload {
		t.Errorf("direction %v, want upload from the .up suffix", tr[0].Direction)
	}
	bins := tr[0].Bins(time.Second)
	if len(bins) != 2 || !near(bins[0], 24e6, 1) || bins[1] != 0 {
		t.Errorf("bins %v, want [24e6 0] (two packets per ms, then silence)", bins)
	}
}

func TestValueUnitCSV(t *testing.T) {
	tr, err := Load("testdata/units.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{3_500_000, 800_000, 12, 4_000_000, 1_250_000_000}
	got := tr[0].Rates
	if len(got) != len(want) {
		t.Fatalf("rates %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %d bit/s, want %d", i+1, got[i], want[i])
		}
	}
}

func TestHeaderCSVSegmentsAndColumns(t *testing.T) {
	tr, err := Load("testdata/seq.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 2 {
		t.Fatalf("%d traces, want one per *_mbps column", len(tr))
	}
	a, b := tr[0], tr[1]
	if !strings.HasSuffix(a.Name, ":A_throughput_mbps") || len(a.Rates) != 5 {
		t.Fatalf("A: %s %v", a.Name, a.Rates)
	}
	if len(a.SegmentStarts) != 1 || a.SegmentStarts[0] != 3 {
		t.Errorf("A segments %v, want a new segment at index 3 (seq 2 -> 5)", a.SegmentStarts)
	}
	// B has an empty cell at seq 2, so seq 1 -> 5 is a gap too.
	if len(b.Rates) != 4 || len(b.SegmentStarts) != 1 || b.SegmentStarts[0] != 2 {
		t.Errorf("B rates %v segments %v", b.Rates, b.SegmentStarts)
	}
}

func TestIperfCSVBothDirections(t *testing.T) {
	tr, err := LoadSpec("testdata/iperf.csv:upload_mbps")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 1 || tr[0].Direction != shape.Upload {
		t.Fatalf("got %d traces, direction %v", len(tr), tr[0].Direction)
	}
	if got := tr[0].Rates; len(got) != 3 || got[0] != 10e6 || got[2] != 5e6 {
		t.Errorf("upload rates %v", got)
	}
	if len(tr[0].SegmentStarts) != 2 {
		t.Errorf("segments %v: the empty cell and the timestamp jump each start one", tr[0].SegmentStarts)
	}
	all, err := LoadSpec("testdata/iperf.csv")
	if err != nil || len(all) != 2 || all[0].Direction != shape.Download {
		t.Fatalf("whole file: %v, %v", all, err)
	}
	if _, err := LoadSpec("testdata/iperf.csv:nope_mbps"); err == nil || !strings.Contains(err.Error(), "download_mbps, upload_mbps") {
		t.Errorf("unknown column: %v; want the list of columns", err)
	}
}

func TestParseErrorsSayWhere(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"bad.down", "0\n5\n3\n", "bad.down:3: timestamp 3 ms is before"},
		{"bad.down", "0\n5\nx\n", "bad.down:3: \"x\" is not a millisecond"},
		{"zero.down", "0\n0\n", "no duration"},
		{"u.csv", "1,Mbits/sec\n2,furlongs\n", "u.csv:2: unknown unit"},
		{"n.csv", "1,Mbits/sec\n-2,Mbits/sec\n", "n.csv:2: \"-2\" is not a non-negative number"},
		{"h.csv", "a,b\n1,2\n", "h.csv:1: no rate column"},
		{"e.csv", "", "empty file"},
		{"z.csv", "x_mbps\n0\n0\n", "capacity is zero"},
	} {
		_, err := Parse(tc.name, strings.NewReader(tc.in))
		if err == nil {
			t.Errorf("%s %q: no error", tc.name, tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: error %q, want it to contain %q", tc.name, tc.in, err, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"step.down", "burst.up", "units.csv", "seq.csv", "iperf.csv"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(name, b)
	}
	f.Add("x.csv", []byte("1e308,Gbits/sec\n"))
	f.Add("x.down", []byte("0\n9223372036854775807\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		traces, err := Parse(name, strings.NewReader(string(data)))
		if err != nil {
			return
		}
		for _, tr := range traces {
			if err := tr.Validate(); err != nil {
				t.Fatalf("Parse returned an invalid trace: %v", err)
			}
			if tr.Period() <= 0 {
				t.Fatalf("non-positive period %v", tr.Period())
			}
			_ = tr.Stats()
		}
	})
}

// TestPublishedStatistics checks the parsers against benchmark.md §7.3 on
// the real traces. CI has no traces, so it skips there.
func TestPublishedStatistics(t *testing.T) {
	dir := SharedDir(".")
	if dir == "" {
		t.Skip("no shared/traces directory (set MACAKE_TRACES); the real-trace check runs only where the traces are")
	}
	for _, tc := range []struct {
		spec          string
		bins          int
		mean, p5, p95 float64
	}{
		{"mahimahi/ATT-LTE-driving-2016.down", 120, 4.56, 0.58, 11.08},
		{"mahimahi/TMobile-LTE-short.down", 139, 16.65, 4.12, 36.66},
		{"mahimahi/TMobile-LTE-short.up", 140, 13.32, 2.48, 27.53},
		{"mahimahi/Verizon-EVDO-driving.up", 1064, 0.84, 0.07, 1.26},
		{"nyu-mets/bus57.csv", 2403, 7.21, 1.34, 15.30},
		{"nyu-mets/bus62.csv", 3293, 2.64, 0.65, 4.59},
		{"5gophers/car-driving-trace-1.csv:Verizon_throughput_mbps", 120, 274.89, 10.48, 1585.35},
		{"starlink-road/iperf.csv:download_mbps", 17365, 268.20, 75.71, 407.79},
		{"starlink-road/iperf.csv:upload_mbps", 16484, 18.11, 4.91, 34.99},
	} {
		tr, err := LoadSpec(filepath.Join(dir, tc.spec))
		if err != nil {
			t.Errorf("%s: %v", tc.spec, err)
			continue
		}
		s := tr[0].Stats()
		if s.Bins != tc.bins || !near(s.Mean, tc.mean, 0.006) || !near(s.P5, tc.p5, 0.006) || !near(s.P95, tc.p95, 0.006) {
			t.Errorf("%s: %d bins, mean %.3f p5 %.3f p95 %.3f; want %d, %.2f, %.2f, %.2f",
				tc.spec, s.Bins, s.Mean, s.P5, s.P95, tc.bins, tc.mean, tc.p5, tc.p95)
		}
	}
	tr, err := LoadSpec(filepath.Join(dir, "starlink-road/iperf.csv:download_mbps"))
	if err == nil && len(tr[0].SegmentStarts)+1 != 1174 {
		t.Errorf("starlink download: %d runs, want 1174", len(tr[0].SegmentStarts)+1)
	}
}

// TestLoadErrorsNameTheFullPath: a parse error names the file as given
// (an absolute path keeps its leading slash), so the user can open it.
func TestLoadErrorsNameTheFullPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":1:") {
		t.Fatalf("error %v; want it to start with %q", err, path+":1:")
	}
	tr, err := Load("testdata/step.down")
	if err != nil || tr[0].Name != "testdata/step.down" {
		t.Fatalf("trace name %q (%v); tables keep the short set/file name", tr[0].Name, err)
	}
}
