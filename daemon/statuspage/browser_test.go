// SPDX-License-Identifier: Apache-2.0

package statuspage

import (
	"context"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/headless"
	"github.com/macake/macake/shape"
)

var screenshot = flag.String("screenshot", "", "save a PNG of the page drawn from the recorded status to `FILE` (docs/status-page.png)")

// recorded is the status document the daemon package recorded (ten
// minutes of a link on its test rig), moved in time so that its last
// sample is now.
func recorded(t *testing.T) statusapi.Status {
	t.Helper()
	b, err := os.ReadFile("../statusapi/testdata/watch-status.json")
	if err != nil {
		t.Fatal(err)
	}
	var st statusapi.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	h := st.Links[0].History
	shift := time.Since(time.UnixMilli(h.Times[len(h.Times)-1])).Truncate(time.Second)
	for i := range h.Times {
		h.Times[i] += shift.Milliseconds()
	}
	st.Daemon.StartedAt = st.Daemon.StartedAt.Add(shift)
	st.LastApply.At, st.LastApply.LastChange = st.LastApply.At.Add(shift), st.LastApply.LastChange.Add(shift)
	for i := range st.Events {
		st.Events[i].Time = st.Events[i].Time.Add(shift)
	}
	return st
}

// since serves a history as the daemon does: the samples after q.Since.
func since(h *statusapi.History, q statusapi.Query) *statusapi.History {
	out := *h
	i := 0
	for i < len(h.Times) && !time.UnixMilli(h.Times[i]).After(q.Since) {
		i++
	}
	out.Times = h.Times[i:]
	for _, col := range []*[]statusapi.Value{&out.ShaperDown, &out.ShaperUp, &out.AchievedDown, &out.AchievedUp, &out.Baseline, &out.RTT, &out.DelayDown, &out.DelayUp} {
		*col = (*col)[i:]
	}
	return &out
}

// TestPageInChromium draws the recorded status in a real headless
// Chromium: the link's card with its rates, charts with lines, the
// counters and the events, without a console error or a blocked load;
// the page's formatters agree with Go's. -screenshot saves what it drew.
func TestPageInChromium(t *testing.T) {
	b := headless.Start(t)
	st := recorded(t)
	srv := httptest.NewServer(Handler(func(_ context.Context, q statusapi.Query) statusapi.Status {
		out := st
		out.Links = slices.Clone(st.Links)
		out.Links[0].History = since(st.Links[0].History, q)
		return out
	}))
	defer srv.Close()
	p := b.Open(srv.URL+"/", 1180, 900)
	if _, err := p.WaitFor(`document.querySelectorAll('section.link[data-link="home"] path').length >= 4`, 5*time.Second); err != nil {
		t.Fatalf("the page did not draw the link's charts: %v\nproblems: %q", err, p.Problems())
	}
	var got map[string]string
	if err := p.Eval(`Object.fromEntries([...document.querySelectorAll('section.link[data-link="home"] [data-field]')].map(e => [e.dataset.field, e.textContent]))`, &got); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"title": "home", "state": "sleeping", "download-rate": "80.0 Mbit/s", "upload-rate": "20.0 Mbit/s", "baseline": "20.0ms",
	} {
		if got[field] != want {
			t.Errorf("%s: %q, want %q", field, got[field], want)
		}
	}
	if !strings.Contains(got["counters"], "66") || !strings.Contains(got["download-legend"], "download shaper") {
		t.Errorf("counters %q, legend %q", got["counters"], got["download-legend"])
	}
	// Every axis label lies inside its chart, whatever its width (a fixed
	// margin clipped "20.0 Mbit/s" to "0.0 Mbit/s"), and one that wide is
	// drawn: the recorded link's rates top out at 100 Mbit/s.
	var clipped []string
	if err := p.Eval(`[...document.querySelectorAll('section.link svg text')].filter(t => t.getBBox().x < 0).map(t => t.textContent)`, &clipped); err != nil {
		t.Fatal(err)
	}
	if len(clipped) > 0 {
		t.Errorf("axis labels cut off at the left of their chart: %q", clipped)
	}
	var wide bool
	p.Eval(`[...document.querySelectorAll('section.link svg text')].some(t => t.textContent === "100 Mbit/s" || t.textContent === "50.0 Mbit/s")`, &wide)
	if !wide {
		t.Error("no chart has a label as wide as 50.0 Mbit/s, so the test shows nothing")
	}
	var events []string
	if err := p.Eval(`[...document.querySelectorAll('#events li')].map(e => e.textContent)`, &events); err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || !strings.Contains(events[0], "controller sleeping") || !strings.Contains(strings.Join(events, "\n"), "rate cut: download") {
		t.Errorf("events, newest first: %q", events)
	}

	// The page formats as status does: one rule, written twice, kept equal.
	rates := []float64{0, 999, 1000, 950e3, 12e6, 99.94e6, 99.96e6, 480e6, 1.5e9}
	lats := []time.Duration{0, 42300 * time.Microsecond, 999 * time.Millisecond, 1250 * time.Millisecond}
	var js struct{ Rates, Lats []string }
	ratesJSON, _ := json.Marshal(rates)
	var secs []float64
	for _, d := range lats {
		secs = append(secs, d.Seconds())
	}
	latsJSON, _ := json.Marshal(secs)
	if err := p.Eval(`({Rates: `+string(ratesJSON)+`.map(fmtRate), Lats: `+string(latsJSON)+`.map(fmtLatency)})`, &js); err != nil {
		t.Fatal(err)
	}
	for i, r := range rates {
		if want := shape.FormatApprox(r); js.Rates[i] != want {
			t.Errorf("fmtRate(%v) = %q, shape.FormatApprox says %q", r, js.Rates[i], want)
		}
	}
	for i, d := range lats {
		if want := shape.FormatLatency(d); js.Lats[i] != want {
			t.Errorf("fmtLatency(%v) = %q, shape.FormatLatency says %q", d, js.Lats[i], want)
		}
	}
	// A second poll has come and gone (with ?since=), changing nothing.
	time.Sleep(1500 * time.Millisecond)
	var paths int
	p.Eval(`document.querySelectorAll('section.link path').length`, &paths)
	if paths < 4 {
		t.Errorf("after the next poll the charts have %d lines", paths)
	}
	if probs := p.Problems(); len(probs) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(probs, "\n"))
	}
	if *screenshot != "" {
		png, err := p.Screenshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
