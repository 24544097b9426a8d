// SPDX-License-Identifier: Apache-2.0

package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/loopback"
)

func TestPageIsReadOnlyLoopbackAndSelfContained(t *testing.T) {
	var asked statusapi.Query
	// As Serve serves it: the endpoint's checks around the page.
	h := Endpoint.Handler(Handler(func(_ context.Context, q statusapi.Query) statusapi.Status {
		asked = q
		return statusapi.Status{FormatVersion: statusapi.FormatVersion, Links: []statusapi.Link{{Name: "home"}}}
	}))
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
	err := Serve(context.Background(), "0.0.0.0:9847", nil, nil)
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
		done <- Endpoint.Serve(ctx, ln, Handler(func(context.Context, statusapi.Query) statusapi.Status { return statusapi.Status{} }), nil)
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
