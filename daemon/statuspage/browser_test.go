// SPDX-License-Identifier: Apache-2.0

package statuspage

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/internal/headless"
	"github.com/macake/macake/shape"
)

var screenshot = flag.String("screenshot", "", "save a PNG of the page drawn from the recorded status to `FILE` (docs/status-page.png)")

// recorded is the status document the daemon package recorded (ten
// minutes of a link on its test rig), moved in time so that its last
// sample is now.
func recorded(t *testing.T) statusapi.Status {
	t.Helper()
	st := golden.ReadJSON[statusapi.Status](t, "../statusapi/testdata/watch-status.json")
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
	st.Links[0].Advice = []statusapi.Advice{{Direction: "download", Bound: "max", File: "/etc/macake/links.d/home.toml",
		Edit:    `[autorate] download = { min = "10mbit", max = "140mbit" }`,
		Message: "download sat at max 62% of its loaded time in the last hour (38 min loaded): raise max from 100 Mbit/s to ~140 Mbit/s"}}
	srv := httptest.NewServer(Handler(Options{Status: func(_ context.Context, q statusapi.Query) statusapi.Status {
		out := st
		out.Links = slices.Clone(st.Links)
		out.Links[0].History = since(st.Links[0].History, q)
		return out
	}, Pause: func(context.Context, statusapi.PauseChange) (*statusapi.Pause, error) {
		t.Error("the page paused by itself")
		return nil, nil
	}}))
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
	if want := `download sat at max 62% of its loaded time in the last hour (38 min loaded): raise max from 100 Mbit/s to ~140 Mbit/s. In /etc/macake/links.d/home.toml set [autorate] download = { min = "10mbit", max = "140mbit" }`; got["advice"] != want {
		t.Errorf("advice: %q, want %q", got["advice"], want)
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

// TestPauseButtonsInChromium: in a real headless Chromium, a click on a
// link's "Pause 15 min" pauses it (the daemon is asked, and the page then
// shows the link paused with the time left), "Resume" resumes it; and a
// page of another origin cannot pause, neither by a JSON fetch (its
// preflight is refused) nor by a plain cross-site POST (the request
// arrives and is refused for its origin), even with the token.
func TestPauseButtonsInChromium(t *testing.T) {
	b := headless.Start(t)
	st := recorded(t)
	var mu sync.Mutex
	var paused *statusapi.Pause
	var asked []statusapi.PauseChange
	type hit struct {
		method string
		code   int
	}
	var hits []hit
	h := Handler(Options{
		Status: func(_ context.Context, q statusapi.Query) statusapi.Status {
			mu.Lock()
			defer mu.Unlock()
			out := st
			out.Links = slices.Clone(st.Links)
			out.Links[0].History = since(st.Links[0].History, q)
			out.Pauses = []statusapi.Pause{}
			if paused != nil {
				p := *paused
				p.RemainingSeconds = time.Until(p.Until).Round(time.Second).Seconds()
				out.Pauses = append(out.Pauses, p)
				out.Links[0].PausedUntil = p.Until
			}
			return out
		},
		Pause: func(_ context.Context, c statusapi.PauseChange) (*statusapi.Pause, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, c)
			paused = nil
			if c.For > 0 {
				paused = &statusapi.Pause{Link: c.Link, Since: time.Now(), Until: time.Now().Add(c.For), RemainingSeconds: c.For.Seconds(), By: c.By}
			}
			return paused, nil
		},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if r.URL.Path == "/api/pause" {
			mu.Lock()
			hits = append(hits, hit{r.Method, rec.Code})
			mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()

	p := b.Open(srv.URL+"/", 1180, 900)
	const button = `section.link[data-link="home"] button[data-pause="%s"]`
	if _, err := p.WaitFor(fmt.Sprintf("document.querySelector('%s')", fmt.Sprintf(button, "900")), 5*time.Second); err != nil {
		t.Fatalf("no pause button on the link: %v\nproblems: %q", err, p.Problems())
	}
	if err := p.Click(fmt.Sprintf(button, "900")); err != nil {
		t.Fatal(err)
	}
	state := `document.querySelector('section.link[data-link="home"] [data-field="state"]').textContent`
	if _, err := p.WaitFor(state+`.startsWith("paused (14m5") || `+state+`.startsWith("paused (15m00s")`, 3*time.Second); err != nil {
		var shown string
		p.Eval(state, &shown)
		t.Fatalf("the page does not show the pause: state %q: %v\nproblems: %q", shown, err, p.Problems())
	}
	var banner, result string
	p.Eval(`document.getElementById("paused").textContent`, &banner)
	p.Eval(`document.querySelector('section.link[data-link="home"] [data-field="control-result"]').textContent`, &result)
	if !strings.HasPrefix(banner, "Paused: home until ") || !strings.Contains(banner, "left; by the status page") || !strings.HasPrefix(result, "paused: home until") {
		t.Errorf("after the click: banner %q, beside the buttons %q", banner, result)
	}
	if err := p.Click(fmt.Sprintf(button, "0")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitFor(`!`+state+`.startsWith("paused") && document.getElementById("paused").hidden`, 3*time.Second); err != nil {
		t.Errorf("the page still shows the pause after Resume: %v", err)
	}
	mu.Lock()
	want := []statusapi.PauseChange{{Link: "home", For: 15 * time.Minute, By: "the status page"}, {Link: "home", By: "the status page"}}
	if !slices.Equal(asked, want) {
		t.Errorf("the daemon was asked %+v, want %+v", asked, want)
	}
	mu.Unlock()
	var token string
	if err := p.Eval(`document.querySelector('meta[name="macake-token"]').content`, &token); err != nil {
		t.Fatal(err)
	}
	if probs := p.Problems(); len(probs) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(probs, "\n"))
	}

	// Another origin (another port of 127.0.0.1) tries, with the token.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>another site</title>")
	}))
	defer evil.Close()
	e := b.Open(evil.URL+"/", 800, 600)
	mu.Lock()
	before := len(hits)
	mu.Unlock()
	var outcome []string
	script := fmt.Sprintf(`(async () => {
		const out = [];
		try {
			const r = await fetch(%[1]q, {method: "POST", headers: {"Content-Type": "application/json", "X-Macake-Token": %[2]q}, body: '{"link":"home","seconds":3600}'});
			out.push("json: answered " + r.status);
		} catch (err) { out.push("json: blocked"); }
		try {
			const r = await fetch(%[1]q, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"link":"home","seconds":3600}'});
			out.push("simple: " + r.type);
		} catch (err) { out.push("simple: blocked"); }
		return out;
	})()`, srv.URL+"/api/pause", token)
	if err := e.Eval(script, &outcome); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Errorf("another origin paused: %+v", asked[2:])
	}
	if strings.Join(outcome, ", ") != "json: blocked, simple: opaque" {
		t.Errorf("the other origin's requests: %q", outcome)
	}
	// The JSON fetch stopped at its preflight; the simple one arrived and
	// was refused for its origin.
	if got := hits[before:]; !slices.Equal(got, []hit{{"OPTIONS", 405}, {"POST", 403}}) {
		t.Errorf("the page's server saw %+v, want a refused preflight and a refused POST", got)
	}
}

// TestPageShowsCakeTins: under a CAKE shaper, the page's second table
// has a row per tin that carried traffic (diffserv3's idle bulk tin has
// none), with what CAKE counted and measured; without tins (the recorded
// dummynet status) the table stays hidden.
func TestPageShowsCakeTins(t *testing.T) {
	b := headless.Start(t)
	st := recorded(t)
	var noTins atomic.Bool // the handler runs on the server's goroutines
	srv := httptest.NewServer(Handler(Options{Status: func(_ context.Context, q statusapi.Query) statusapi.Status {
		out := st
		out.Links = slices.Clone(st.Links)
		out.Links[0].History = since(st.Links[0].History, q)
		if !noTins.Load() {
			sh := slices.Clone(out.Links[0].Shapers)
			for i := range sh {
				if sh[i].Direction == "download" && sh[i].Stats != nil {
					stats := *sh[i].Stats
					stats.Tins = []statusapi.TinStats{
						{Name: "bulk"},
						{Name: "best_effort", Bytes: 36663754, Packets: 58092, Drops: 6496, ECNMarks: 12, AverageDelaySeconds: 0.000398,
							PeakDelaySeconds: 0.00881, SparseFlows: 8, BulkFlows: 1},
						{Name: "voice", Bytes: 84, Packets: 2},
					}
					sh[i].Stats = &stats
				}
			}
			out.Links[0].Shapers = sh
		}
		return out
	}}))
	defer srv.Close()
	p := b.Open(srv.URL+"/", 1180, 900)
	if _, err := p.WaitFor(`document.querySelectorAll('section.link [data-field="tins"] tr').length > 0`, 5*time.Second); err != nil {
		t.Fatalf("the page drew no tins: %v\nproblems: %q", err, p.Problems())
	}
	var rows []string
	if err := p.Eval(`[...document.querySelectorAll('section.link [data-field="tins"] tr')].map(r => [...r.cells].map(c => c.textContent).join("|"))`, &rows); err != nil {
		t.Fatal(err)
	}
	want := []string{"best_effort|download|35.0 MB|58092|6496|12|0 B|0.4ms|8.8ms|8|1", "voice|download|84 B|2|0|0|0 B|<0.1ms|<0.1ms|0|0"}
	if !slices.Equal(rows, want) {
		t.Errorf("tin rows:\n got %q\nwant %q", rows, want)
	}
	noTins.Store(true)
	if _, err := p.WaitFor(`document.querySelector('section.link [data-field="tins-table"]').hidden`, 5*time.Second); err != nil {
		t.Errorf("the tins table stayed shown once the shaper had no tins: %v", err)
	}
	if probs := p.Problems(); len(probs) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(probs, "\n"))
	}
}
