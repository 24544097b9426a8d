// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/linkmodel"
)

func TestTableAligns(t *testing.T) {
	tb := Table{Header: []string{"name", "value"}}
	tb.Add("a", "1.0")
	tb.Add("longer", "10.25")
	var b bytes.Buffer
	tb.Write(&b)
	want := "name    value\na         1.0\nlonger  10.25\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func results(t *testing.T, series bool) []*sim.Result {
	t.Helper()
	l := linkmodel.Constant("c", 20e6, 5e6, 30*time.Millisecond)
	arms, _ := sim.BaselineArms("none", "fixed")
	var jobs []sim.Job
	for _, a := range arms {
		jobs = append(jobs, sim.Job{Link: l, Options: sim.Options{Duration: 4 * time.Second, Warmup: time.Second, Flows: [2]int{1, 2}, Series: series, Phases: [2]time.Duration{}}, Arm: a})
	}
	res, err := sim.RunAll(jobs, 1)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSVGIsWellFormedWithAPanelPerControllerAndDirection(t *testing.T) {
	var b bytes.Buffer
	if err := SVG(&b, "test <&> title", results(t, true)); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	dec := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
	for _, want := range []string{"none — download", "none — upload", "fixed — download", "fixed — upload", "test &lt;&amp;&gt; title"} {
		if !strings.Contains(s, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if err := SVG(io.Discard, "x", results(t, false)); err == nil {
		t.Error("SVG without series: no error")
	}
}

func TestComparisonAndPhases(t *testing.T) {
	var b bytes.Buffer
	res := results(t, false)
	Comparison(&b, res)
	out := b.String()
	if !strings.Contains(out, "download (mean capacity 20.0 Mbit/s") || !strings.Contains(out, "upload (mean capacity 5.0 Mbit/s") || strings.Count(out, "fixed ") != 3 || !strings.Contains(out, "The call beside the load (50 packets/s of 200 bytes each way") {
		t.Errorf("comparison:\n%s", out)
	}
	r := res[1]
	r.Phases = []sim.Phase{
		{Name: "off", Goodput: [2]float64{shape.Download: 200}, RTT50: 40, RTT90: 60, Samples: 100},
		{Name: "on", Goodput: [2]float64{shape.Download: 124}, RTT50: 10, RTT90: 15, Samples: 100},
		{Name: "off again", Goodput: [2]float64{shape.Download: 200}, RTT50: 40, RTT90: 60, Samples: 100},
	}
	b.Reset()
	Phases(&b, "fixed", r)
	if out := b.String(); !strings.Contains(out, "62.0 % of the download kept; added median -75 %, p90 -75 %") || strings.Contains(out, "no evidence") {
		t.Errorf("phases:\n%s", out)
	}
	// The off phases 125 Mbit/s apart: the table says it proves nothing.
	r.Phases[2].Goodput[shape.Download] = 325
	b.Reset()
	Phases(&b, "fixed", r)
	if out := b.String(); !strings.Contains(out, "this table is no evidence") {
		t.Errorf("phases with a drifting baseline:\n%s", out)
	}
}

// TestSVGOpensWithTheBeforeAndAfter: with an unshaped and a shaped arm,
// the picture opens with the headline (who wins, by how much) and the
// before/after panel, unshaped and shaped delay on one linear axis, then
// the detail, whose legend says what oracle and score are; and the text
// report opens with the same headline.
func TestSVGOpensWithTheBeforeAndAfter(t *testing.T) {
	res := results(t, true)
	res[1].Controller = Shaped
	var b bytes.Buffer
	if err := SVG(&b, "t", res); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	head := strings.Index(s, "Shaped, the added delay (95th percentile) went from")
	panel := strings.Index(s, "on one linear scale")
	detail := strings.Index(s, "The detail: every controller")
	if head < 0 || panel < head || detail < panel {
		t.Errorf("the picture does not open with the headline, then the before/after panel, then the detail")
	}
	for _, want := range []string{"oracle: a shaper told the link", "score: U ÷ (1 + D95 ÷ 30 ms)", "unshaped", "Shaping kept"} {
		if !strings.Contains(s, want) {
			t.Errorf("the picture lacks %q", want)
		}
	}
	b.Reset()
	Comparison(&b, res)
	if !strings.HasPrefix(b.String(), "Shaped, the added delay (95th percentile) went from") || !strings.Contains(b.String(), "oracle: a shaper told") {
		t.Errorf("the text report:\n%s", b.String())
	}
	// Without a shaped arm, no headline.
	b.Reset()
	res[1].Controller = "fixed"
	if err := SVG(&b, "t", res); err != nil || strings.Contains(b.String(), "Shaped, the added delay") {
		t.Errorf("a headline without a shaped arm: %v", err)
	}
}
