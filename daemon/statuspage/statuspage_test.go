// SPDX-License-Identifier: Apache-2.0

package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/loopback"
)

func TestPageIsReadOnlyLoopbackAndSelfContained(t *testing.T) {
	var asked statusapi.Query
	// As Serve serves it: the endpoint's checks around the page.
	h := Endpoint.Handler(Handler(Options{Status: func(_ context.Context, q statusapi.Query) statusapi.Status {
		asked = q
		return statusapi.Status{FormatVersion: statusapi.FormatVersion, Links: []statusapi.Link{{Name: "home"}}}
	}}))
	do := func(method, target, host string) *http.Response {
		t.Helper()
		r := httptest.NewRequest(method, target, nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
	for _, c := range []struct {
		method, target, host string
		code                 int
		contentType          string
	}{
		{"GET", "/", "127.0.0.1:9847", 200, "text/html"},
		{"GET", "/app.js", "localhost:9847", 200, "text/javascript"},
		{"GET", "/app.css", "[::1]:9847", 200, "text/css"},
		{"HEAD", "/", "localhost", 200, "text/html"},
		{"GET", "/api/status", "127.0.0.1:9847", 200, "application/json"},
		{"GET", "/api/status?since=abc", "127.0.0.1:9847", 400, ""},
		{"GET", "/index.html", "127.0.0.1:9847", 404, ""},
		{"GET", "/assets/app.js", "127.0.0.1:9847", 404, ""},
		{"POST", "/api/status", "127.0.0.1:9847", 405, ""},
		{"PUT", "/", "127.0.0.1:9847", 405, ""},
		{"DELETE", "/api/status", "127.0.0.1:9847", 405, ""},
		// DNS rebinding: a foreign name resolved to 127.0.0.1 still says
		// its own name.
		{"GET", "/api/status", "attacker.example:9847", 421, ""},
		{"GET", "/", "192.168.1.20:9847", 421, ""},
	} {
		resp := do(c.method, c.target, c.host)
		if resp.StatusCode != c.code {
			t.Errorf("%s %s (Host %s): %d, want %d", c.method, c.target, c.host, resp.StatusCode, c.code)
		}
		if got := resp.Header.Get("Content-Type"); c.contentType != "" && !strings.HasPrefix(got, c.contentType) {
			t.Errorf("%s %s: Content-Type %q", c.method, c.target, got)
		}
		if resp.StatusCode == http.StatusMisdirectedRequest {
			// Refused by the endpoint before the page sees it, as the
			// metrics refuse it: a plain text error.
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s %s: a refusal without nosniff: %v", c.method, c.target, resp.Header)
			}
			continue
		}
		if resp.Header.Get("Content-Security-Policy") != csp || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: missing security headers: %v", c.method, c.target, resp.Header)
		}
	}

	resp := do("GET", "/api/status?since=1700000000123", "localhost:9847")
	var st statusapi.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st.Links) != 1 || st.Links[0].Name != "home" {
		t.Fatalf("status: %+v %v", st, err)
	}
	if !asked.History || !asked.Events || !asked.Since.Equal(time.UnixMilli(1700000000123)) {
		t.Errorf("the page asked %+v, want history since the given time and events", asked)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Error("the status API may be cached")
	}
}

// TestAssetsLoadNothingFromElsewhere: no URL in the page, its script or
// its style points off the machine (the SVG namespace is a name, never
// fetched), and the page loads only its own two files.
func TestAssetsLoadNothingFromElsewhere(t *testing.T) {
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		for _, u := range url.FindAllString(string(b), -1) {
			if u != "http://www.w3.org" {
				t.Errorf("%s refers to %s", path, u)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := fs.ReadFile(assets, "assets/index.html")
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(page), -1)
	var got []string
	for _, r := range refs {
		got = append(got, r[1])
	}
	if strings.Join(got, " ") != "data:, app.css app.js" {
		t.Errorf("the page loads %q, want only its icon placeholder, style and script", got)
	}
}

func TestServeRefusesNonLoopback(t *testing.T) {
	err := Serve(context.Background(), "0.0.0.0:9847", Options{}, nil)
	if !errors.Is(err, loopback.ErrNotLoopback) || !strings.Contains(err.Error(), "status page: refusing") || !strings.Contains(err.Error(), "SSH tunnel") {
		t.Errorf("Serve(0.0.0.0:9847): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ln, err := Endpoint.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go func() {
		done <- Endpoint.Serve(ctx, ln, Handler(Options{Status: func(context.Context, statusapi.Query) statusapi.Status { return statusapi.Status{} }}), nil)
	}()
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `<script src="app.js" defer></script>`) {
		t.Errorf("GET / over TCP:\n%s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after the context ended: %v", err)
	}
}

// pauses records what the page's pause requests asked the daemon.
type pauses struct {
	mu  sync.Mutex
	got []statusapi.PauseChange
	err error
}

func (p *pauses) pause(_ context.Context, c statusapi.PauseChange) (*statusapi.Pause, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, c)
	if p.err != nil || c.For == 0 {
		return nil, p.err
	}
	return &statusapi.Pause{Link: c.Link, Until: time.Now().Add(c.For), RemainingSeconds: c.For.Seconds(), By: c.By}, nil
}

func (p *pauses) taken() []statusapi.PauseChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// TestPauseRequestsAreGuarded: a pause reaches the daemon only by POST
// from the page's own origin, in JSON, with the page's token, on a
// loopback name; every other request is refused with why, and a page
// whose daemon settings turn control off has neither the token nor the
// endpoint.
func TestPauseRequestsAreGuarded(t *testing.T) {
	var p pauses
	h := Endpoint.Handler(Handler(Options{Status: func(context.Context, statusapi.Query) statusapi.Status { return statusapi.Status{} }, Pause: p.pause, Token: "t0k3n"})) // as Serve serves it
	const host, origin = "127.0.0.1:9847", "http://127.0.0.1:9847"
	good := map[string]string{"Origin": origin, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json", TokenHeader: "t0k3n"}
	with := func(k, v string) map[string]string {
		m := maps.Clone(good)
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name, method, host string
		headers            map[string]string
		body               string
		code               int
		says               string
	}{
		{"from the page", "POST", host, good, `{"link":"home","seconds":900}`, 200, `"link":"home"`},
		{"resume every link", "POST", host, good, `{"link":"","seconds":0}`, 200, `"pause":null`},
		{"another origin", "POST", host, with("Origin", "http://attacker.example"), `{"link":"home","seconds":900}`, 403, "must come from the status page itself"},
		{"no origin", "POST", host, with("Origin", ""), `{"link":"home","seconds":900}`, 403, "must come from the status page itself"},
		{"another port", "POST", host, with("Origin", "http://127.0.0.1:9999"), `{"link":"home","seconds":900}`, 403, "origin"},
		{"cross-site fetch", "POST", host, with("Sec-Fetch-Site", "cross-site"), `{"link":"home","seconds":900}`, 403, "Sec-Fetch-Site"},
		{"a form", "POST", host, with("Content-Type", "application/x-www-form-urlencoded"), `link=home&seconds=900`, 415, "JSON"},
		{"text", "POST", host, with("Content-Type", "text/plain"), `{"link":"home","seconds":900}`, 415, "JSON"},
		{"no token", "POST", host, with(TokenHeader, ""), `{"link":"home","seconds":900}`, 403, "token"},
		{"a wrong token", "POST", host, with(TokenHeader, "guess"), `{"link":"home","seconds":900}`, 403, "token"},
		{"DNS rebinding", "POST", "attacker.example:9847", with("Origin", "http://attacker.example:9847"), `{"link":"home","seconds":900}`, 421, "localhost"},
		{"GET", "GET", host, good, "", 405, "POST only"},
		{"PUT", "PUT", host, good, `{"link":"home","seconds":900}`, 405, "POST only"},
		{"OPTIONS (a preflight)", "OPTIONS", host, good, "", 405, "POST only"},
		{"not JSON", "POST", host, good, `pause please`, 400, "not {"},
		{"an unknown field", "POST", host, good, `{"link":"home","seconds":900,"reboot":true}`, 400, "reboot"},
		{"negative", "POST", host, good, `{"link":"home","seconds":-1}`, 400, "0 (resume) or more"},
		{"a bad name", "POST", host, good, `{"link":"../etc","seconds":60}`, 400, "cannot name a link"},
		{"too large", "POST", host, good, `{"link":"` + strings.Repeat("a", 2000) + `","seconds":60}`, 400, "too large"},
	} {
		r := httptest.NewRequest(c.method, "/api/pause", strings.NewReader(c.body))
		r.Host = c.host
		for k, v := range c.headers {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.says) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, w.Code, w.Body.String(), c.code, c.says)
		}
	}
	want := []statusapi.PauseChange{{Link: "home", For: 15 * time.Minute, By: "the status page"}, {By: "the status page"}}
	if got := p.taken(); !slices.Equal(got, want) {
		t.Errorf("the daemon was asked %+v, want %+v", got, want)
	}

	// The daemon's refusal comes back to the page.
	p.err = errors.New(`no policy is named "hotel"`)
	r := httptest.NewRequest("POST", "/api/pause", strings.NewReader(`{"link":"hotel","seconds":60}`))
	r.Host = host
	for k, v := range good {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 409 || !strings.Contains(w.Body.String(), `no policy is named \"hotel\"`) {
		t.Errorf("a refusal: %d %s", w.Code, w.Body)
	}

	// The page carries the token; a page without control has none, and
	// no endpoint; each daemon's page has its own.
	body := func(h http.Handler) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Body.String()
	}
	if b := body(h); !strings.Contains(b, `<meta name="macake-token" content="t0k3n">`) || !strings.Contains(b, "buttons pause and resume") {
		t.Errorf("the page lacks its token:\n%s", b)
	}
	readOnly := Handler(Options{Status: func(context.Context, statusapi.Query) statusapi.Status { return statusapi.Status{} }})
	if b := body(readOnly); strings.Contains(b, "macake-token") || !strings.Contains(b, "Read-only.") {
		t.Errorf("the read-only page:\n%s", b)
	}
	r = httptest.NewRequest("POST", "/api/pause", strings.NewReader(`{"link":"home","seconds":60}`))
	r.Host = host
	for k, v := range good {
		r.Header.Set(k, v)
	}
	w = httptest.NewRecorder()
	readOnly.ServeHTTP(w, r)
	if w.Code != 405 {
		t.Errorf("POST /api/pause to a read-only page: %d", w.Code)
	}
	tokenOf := func(h http.Handler) string {
		m := regexp.MustCompile(`macake-token" content="([0-9a-f]+)"`).FindStringSubmatch(body(h))
		if m == nil {
			t.Fatal("no token in the page")
		}
		return m[1]
	}
	a := tokenOf(Handler(Options{Status: func(context.Context, statusapi.Query) statusapi.Status { return statusapi.Status{} }, Pause: p.pause}))
	b := tokenOf(Handler(Options{Status: func(context.Context, statusapi.Query) statusapi.Status { return statusapi.Status{} }, Pause: p.pause}))
	if len(a) != 32 || a == b {
		t.Errorf("tokens %q and %q: want a fresh 128-bit one per daemon", a, b)
	}
}
