// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/probe"
)

func TestGradeBands(t *testing.T) {
	for _, c := range []struct {
		added time.Duration
		want  Grade
	}{
		{-3 * time.Millisecond, "A+"}, {0, "A+"}, {ms(4.9), "A+"}, {ms(5), "A"}, {ms(29.9), "A"}, {ms(30), "B"},
		{ms(59.99), "B"}, {ms(60), "C"}, {ms(199), "C"}, {ms(200), "D"}, {ms(399.9), "D"}, {ms(400), "F"}, {5 * time.Second, "F"},
	} {
		if got := GradeFor(c.added); got != c.want {
			t.Errorf("GradeFor(%v) = %s, want %s", c.added, got, c.want)
		}
	}
	if got := gradeLegend(); got != "A+ under 5ms, A under 30ms, B under 60ms, C under 200ms, D under 400ms, else F" {
		t.Errorf("legend %q", got)
	}
}

func TestRPM(t *testing.T) {
	for _, c := range []struct {
		rtt   time.Duration
		rpm   float64
		class string
	}{
		{ms(10), 6000, "excellent"}, {ms(10.01), 5994.006, "good"}, {ms(60), 1000, "good"}, {ms(60.1), 998.336, "fair"},
		{ms(200), 300, "fair"}, {ms(201), 298.507, "poor"}, {0, -1, ""},
	} {
		rpm := RPM(c.rtt)
		if rpm < c.rpm-0.01 || rpm > c.rpm+0.01 || RPMClass(rpm) != c.class {
			t.Errorf("RPM(%v) = %.3f %q, want %.3f %q", c.rtt, rpm, RPMClass(rpm), c.rpm, c.class)
		}
	}
}

// TestFormatRPM: a round trip under 1 ms is not printed as hundreds of
// thousands of round trips per minute (issue 27, item 8).
func TestFormatRPM(t *testing.T) {
	for rtt, want := range map[time.Duration]string{ms(10): "6000", ms(1): "over 60000", ms(0.134): "over 60000", ms(1.01): "59406", 0: "-"} {
		if got := FormatRPM(RPM(rtt)); got != want {
			t.Errorf("FormatRPM(RPM(%v)) = %q, want %q", rtt, got, want)
		}
	}
}

// TestGradesAndConfidence grades a measured load and says when not to
// trust it: a short load, lost probes, an idle jitter that straddles a
// band, targets that disagree.
func TestGradesAndConfidence(t *testing.T) {
	a, b := netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("9.9.9.9")
	sum := func(p50, p90 float64, n, lost int) probe.Summary {
		return probe.Summary{Samples: n, Lost: lost, P50: ms(p50), P90: ms(p90), TM95: ms(p50 + 1)}
	}
	window := func(d time.Duration) speedtest.Result {
		t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		return speedtest.Result{Start: t0, SteadyFrom: t0, SteadyTo: t0.Add(d)}
	}
	phase := func(idle map[netip.Addr]probe.Summary, loaded map[netip.Addr]probe.Summary) PhaseLatency {
		return PhaseLatency{Targets: loaded, Added: probe.LikeForLike(idle, loaded)}
	}
	idle := map[netip.Addr]probe.Summary{a: sum(20, 21, 50, 0), b: sum(30, 31, 50, 0)}
	firm := LoadResult{Idle: idle, Download: window(8 * time.Second), Upload: window(8 * time.Second),
		BothDownload: window(8 * time.Second), BothUpload: window(8 * time.Second),
		DownLatency: phase(idle, map[netip.Addr]probe.Summary{a: sum(30, 40, 80, 0), b: sum(40, 50, 80, 0)}),
		UpLatency:   phase(idle, map[netip.Addr]probe.Summary{a: sum(22, 24, 80, 0), b: sum(32, 34, 80, 0)}),
		BothLatency: phase(idle, map[netip.Addr]probe.Summary{a: sum(70, 90, 80, 0), b: sum(80, 95, 80, 0)}),
	}
	g := NewGrades(firm)
	if g.Download.Grade != "A" || g.Upload.Grade != "A+" || g.Both.Grade != "B" || g.Overall != "A" || g.Confidence != "high" || len(g.Notes) != 0 {
		t.Errorf("grades %+v", g)
	}
	// Both ways: loaded round trips 71 and 81 ms (TM95), median 76 ms.
	if *g.Both.RPM != 789 || g.Both.Responsiveness != "fair" || *g.IdleRPM != 2308 {
		t.Errorf("responsiveness both %v %q, idle %v", *g.Both.RPM, g.Both.Responsiveness, *g.IdleRPM)
	}

	shaky := firm
	shaky.Download = window(3 * time.Second)
	shaky.UpLatency = phase(idle, map[netip.Addr]probe.Summary{a: sum(22, 24, 60, 20), b: sum(32, 34, 60, 20)})
	shaky.BothLatency = phase(idle, map[netip.Addr]probe.Summary{a: sum(23, 30, 80, 0), b: sum(130, 150, 80, 0)})
	shaky.Idle = map[netip.Addr]probe.Summary{a: sum(20, 21, 50, 0), b: sum(30, 31, 50, 0)}
	g = NewGrades(shaky)
	notes := strings.Join(g.Notes, "\n")
	for _, want := range []string{
		"the download load ran only 3s at full rate (--duration 10s or more gives a firmer grade)",
		"25 % of the probes got no reply under the upload load: the grade flatters the link",
		"the latency targets disagree about the both-ways load (from A+ to C)",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if g.Confidence != "low" {
		t.Errorf("confidence %q with notes", g.Confidence)
	}

	// A jitter of ±10 ms around +25 ms: A or B.
	jittery := firm
	jittery.Idle = map[netip.Addr]probe.Summary{a: sum(20, 30, 50, 0), b: sum(30, 40, 50, 0)}
	jittery.DownLatency = phase(jittery.Idle, map[netip.Addr]probe.Summary{a: sum(45, 60, 80, 0), b: sum(55, 70, 80, 0)})
	if notes := strings.Join(NewGrades(jittery).Notes, "\n"); !strings.Contains(notes, "the idle jitter (±10.0ms) makes the download grade anything from A to B") {
		t.Errorf("jitter notes:\n%s", notes)
	}

	// Nothing answered under a load: no grade, no overall grade.
	silent := firm
	silent.UpLatency = PhaseLatency{Added: probe.Added{P50: -1, P90: -1}}
	if g := NewGrades(silent); g.Upload.Grade != "" || g.Overall != "" || !strings.Contains(strings.Join(g.Notes, " "), "no latency target answered under the upload load") {
		t.Errorf("silent upload: %+v", g)
	}
}
