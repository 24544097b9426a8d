// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrNotLoopback matches (errors.Is) the error for a listen address that
// is not loopback.
var ErrNotLoopback = errors.New("not a loopback address")

// notLoopbackError explains the refusal: the reason matters more than the
// rule.
type notLoopbackError struct{ addr, why string }

func (e *notLoopbackError) Error() string {
	return fmt.Sprintf("metrics: refusing to listen on %q: %s. The endpoint has no authentication "+
		"and its metrics name your networks and show your traffic, so it serves only on loopback "+
		"(127.0.0.1, ::1 or localhost); to scrape it from another machine, run Prometheus or an "+
		"agent on this one, or use an SSH tunnel", e.addr, e.why)
}

func (e *notLoopbackError) Is(target error) bool { return target == ErrNotLoopback }

// checkLoopback accepts host:port where host is a loopback IP or
// "localhost". Any other name is refused: it could resolve to anything.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics: listen address %q: want host:port, e.g. 127.0.0.1:9846: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if host == "" {
		return &notLoopbackError{addr, "an empty host means every interface"}
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return &notLoopbackError{addr, fmt.Sprintf("%q is a host name, which could resolve to any address", host)}
	case ip.IsUnspecified():
		return &notLoopbackError{addr, ip.String() + " means every interface"}
	case !ip.IsLoopback():
		return &notLoopbackError{addr, ip.String() + " is not a loopback address"}
	}
	return nil
}

// Listen opens the endpoint's TCP listener, refusing any address that is
// not loopback (error wrapping ErrNotLoopback). Port 0 picks a free port;
// the listener's Addr says which.
func Listen(addr string) (net.Listener, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	// "localhost" is resolved by the system; make sure it meant loopback.
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, &notLoopbackError{addr, "it resolved to " + ln.Addr().String() + ", which is not a loopback address"}
	}
	return ln, nil
}

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
	srv := &http.Server{
		Handler: m.Handler(),
		// A scrape is one small GET; anything slower is stuck or hostile.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if m.log != nil {
		srv.ErrorLog = slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("metrics: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	// Give an in-flight scrape a moment, then drop it: shutdown of the
	// daemon must stay quick (launchd's ExitTimeOut).
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	<-done
	return nil
}
