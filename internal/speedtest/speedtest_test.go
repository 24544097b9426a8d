// SPDX-License-Identifier: Apache-2.0

package speedtest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func endpoint(t *testing.T, h http.Handler) Endpoint {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e, err := ServerEndpoint(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func quick(e Endpoint) Config {
	return Config{Endpoint: e, Streams: 2, Duration: 600 * time.Millisecond, StallTimeout: 400 * time.Millisecond}
}

func TestHandlerProtocol(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/download?bytes=3000000")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || n != 3_000_000 || resp.ContentLength != 3_000_000 {
		t.Errorf("download: %s, %d bytes", resp.Status, n)
	}
	for _, bad := range []string{"", "x", "-1", "99999999999999"} {
		resp, _ := http.Get(srv.URL + "/download?bytes=" + bad)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("bytes=%q: %s", bad, resp.Status)
		}
		resp.Body.Close()
	}
	resp, err = http.Post(srv.URL+"/upload", "application/octet-stream", strings.NewReader(strings.Repeat("x", 250_000)))
	if err != nil {
		t.Fatal(err)
	}
	var rep UploadReport
	json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	var sum int64
	for _, b := range rep.Buckets {
		sum += b
	}
	if rep.Bytes != 250_000 || sum != rep.Bytes || rep.BucketNs != int64(BucketSize) || rep.StartUnixNs == 0 {
		t.Errorf("upload report %+v", rep)
	}
	if resp, _ := http.Get(srv.URL + "/upload"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /upload: %s", resp.Status)
	}
}

func TestDownloadAndUploadAgainstOurServer(t *testing.T) {
	e := endpoint(t, Handler())
	if err := Check(t.Context(), nil, e, time.Second); err != nil {
		t.Fatal(err)
	}
	var progress int
	cfg := quick(e)
	cfg.Progress = func(time.Duration, int64, float64) { progress++ }
	d, err := Download(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Bytes < 1_000_000 || d.BitsPerSecond < 10e6 || !d.SteadyTo.After(d.SteadyFrom) || d.Direction != "download" {
		t.Errorf("download %+v", d)
	}
	if progress == 0 {
		t.Error("no progress reported")
	}
	u, err := Upload(t.Context(), quick(e))
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes < 1_000_000 || u.BitsPerSecond < 10e6 || u.Direction != "upload" {
		t.Errorf("upload %+v", u)
	}
}

func TestUploadTimedByCompletionWithoutTimeline(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, "ok")
		default:
			Handler().ServeHTTP(w, r)
		}
	})
	e := endpoint(t, h)
	e.Timeline = false
	u, err := Upload(t.Context(), quick(e))
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes < 1<<20 || u.BitsPerSecond <= 0 {
		t.Errorf("completion-timed upload %+v", u)
	}
}

func TestServerFaultsFailCleanly(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			io.CopyN(io.Discard, r.Body, 100_000)
		} else {
			w.Header().Set("Content-Length", "100000000")
			w.Write(make([]byte, 100_000))
			w.(http.Flusher).Flush()
		}
		select { // then nothing, until the client gives up
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
	}
	reset := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000000")
		w.Write(make([]byte, 50_000))
		w.(http.Flusher).Flush()
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
	}
	fail := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "disk full", http.StatusInternalServerError)
	}
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		upload  bool
		wantErr string
	}{
		{"download: server error", fail, false, "500 Internal Server Error: disk full"},
		{"upload: server error", fail, true, "500 Internal Server Error"},
		{"download: stalls mid-transfer", stall, false, "stalled"},
		{"upload: stops reading mid-transfer", stall, true, "stalled"},
		{"download: connection dropped", reset, false, "after 50000 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := endpoint(t, tc.h)
			cfg := quick(e)
			cfg.Duration = 3 * time.Second
			run := Download
			if tc.upload {
				run = Upload
			}
			start := time.Now()
			res, err := run(t.Context(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %+v, %v; want an error containing %q", res, err, tc.wantErr)
			}
			if res.Bytes != 0 || res.BitsPerSecond != 0 {
				t.Errorf("a failed phase returned a partial result %+v", res)
			}
			t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
		})
	}
}

func TestCheckNamesTheUnreachableEndpoint(t *testing.T) {
	srv := httptest.NewServer(Handler())
	srv.Close()
	e, _ := ServerEndpoint(srv.URL)
	err := Check(context.Background(), nil, e, time.Second)
	if err == nil || !strings.Contains(err.Error(), "cannot reach "+srv.URL) {
		t.Errorf("Check = %v", err)
	}
	for _, bad := range []string{"ftp://x", "localhost:8080", "http://"} {
		if _, err := ServerEndpoint(bad); err == nil {
			t.Errorf("ServerEndpoint(%q) accepted", bad)
		}
	}
}

func TestTimelineRateMergesStreamsOnTheServerClock(t *testing.T) {
	const b = int64(BucketSize)
	// Two streams, the second starting 3 buckets later; 125 000 bytes per
	// 100 ms per stream = 10 Mbit/s each once both run.
	ones := func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = 125_000
		}
		return out
	}
	reps := []UploadReport{
		{Bytes: 30 * 125_000, StartUnixNs: 1e18, BucketNs: b, Buckets: ones(30)},
		{Bytes: 27 * 125_000, StartUnixNs: 1e18 + 3*b, BucketNs: b, Buckets: ones(27)},
	}
	total, rate := timelineRate(reps, 500*time.Millisecond)
	if total != 57*125_000 {
		t.Errorf("total %d", total)
	}
	if rate < 20e6-1 || rate > 20e6+1 {
		t.Errorf("rate %.0f, want 20 Mbit/s after the warm-up", rate)
	}
}

// TestURLs: a server listening on every address names the addresses to
// dial, never "http://[::]:8080" (issue 27, item 13).
func TestURLs(t *testing.T) {
	cidr := func(s string) net.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	machine := []net.Addr{cidr("127.0.0.1/8"), cidr("192.0.2.5/24"), cidr("::1/128"), cidr("fe80::1/64"), cidr("2001:db8::5/64")}
	for _, tc := range []struct {
		addr  net.Addr
		local []net.Addr
		want  []string
	}{
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, machine, []string{"http://192.0.2.5:8080", "http://[2001:db8::5]:8080"}},
		{&net.TCPAddr{Port: 8080}, machine, []string{"http://192.0.2.5:8080", "http://[2001:db8::5]:8080"}},
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 8080}, machine, []string{"http://192.0.2.1:8080"}},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9}, []net.Addr{cidr("127.0.0.1/8")}, []string{"http://127.0.0.1:9"}},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9}, nil, []string{"http://HOST:9"}},
	} {
		if got := URLs(tc.addr, tc.local); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("URLs(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
