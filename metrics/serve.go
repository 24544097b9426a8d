// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/macake/macake/internal/loopback"
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

// Handler returns the HTTP handler: the metrics at /metrics (text or
// OpenMetrics, compressed if asked), a pointer to them at /, 404 elsewhere.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A collector failing (say, process stats) must not hide the rest.
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.reg,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
		EnableOpenMetrics:   true,
		ErrorLog:            promLogger{m.log},
	}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "macake metrics: /metrics\n")
	})
	return mux
}

// promLogger sends promhttp's errors to the daemon's log.
type promLogger struct{ log *slog.Logger }

func (p promLogger) Println(v ...any) {
	if p.log != nil {
		p.log.Warn("metrics endpoint", "error", fmt.Sprint(v...))
	}
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
