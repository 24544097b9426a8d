// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/macake/macake/internal/loopback"
	"github.com/macake/macake/logging"
)

// ErrNotLoopback matches (errors.Is) the error for a listen address that
// is not loopback.
var ErrNotLoopback = loopback.ErrNotLoopback

// endpoint is how the metrics are served: on loopback only.
var endpoint = loopback.Endpoint{
	Name:   "metrics",
	Shows:  "its metrics name your networks and show your traffic",
	Remote: "to scrape it from another machine, run Prometheus or an agent on this one, or use an SSH tunnel",
}

// Listen opens the endpoint's TCP listener, refusing any address that is
// not loopback (error wrapping ErrNotLoopback). Port 0 picks a free port;
// the listener's Addr says which.
func Listen(addr string) (net.Listener, error) { return endpoint.Listen(addr) }

// Handler returns the HTTP handler: the metrics at /metrics (the text
// format, gzipped if the client asks), a pointer to them at /, 404
// elsewhere. At most maxScrapes scrapes run at once; more get 503.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	inFlight := make(chan struct{}, maxScrapes)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
			defer func() { <-inFlight }()
		default:
			http.Error(w, "too many scrapes at once", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", contentType)
		var out io.Writer = w
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			defer gz.Close()
			out = gz
		}
		if err := m.WriteText(out); err != nil && m.log != nil {
			m.log.Warn("metrics endpoint: writing a scrape", logging.KeyError, err)
		}
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "macake metrics: /metrics\n")
	})
	return mux
}

// contentType is the Prometheus text format's.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// maxScrapes bounds the scrapes served at once.
const maxScrapes = 4

// acceptsGzip reports whether an Accept-Encoding header allows gzip.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
			return !ok || (q != "0" && q != "0.0" && q != "0.00" && q != "0.000")
		}
	}
	return false
}

// Serve listens on addr (loopback only; see Listen) and serves the
// metrics until ctx is done, then shuts down gracefully. It returns nil
// after ctx ends and an error if it cannot listen or serving fails.
func (m *Metrics) Serve(ctx context.Context, addr string) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return m.ServeListener(ctx, ln)
}

// ServeListener serves the metrics on ln until ctx is done, like Serve. It
// closes ln.
func (m *Metrics) ServeListener(ctx context.Context, ln net.Listener) error {
	return endpoint.Serve(ctx, ln, m.Handler(), m.log)
}
