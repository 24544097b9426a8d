// SPDX-License-Identifier: Apache-2.0

// Package loopback serves macake's HTTP endpoints (the Prometheus metrics,
// the status page): they have no authentication and show the user's
// networks and traffic, so they listen only on loopback, answer only
// requests addressed to a loopback name, serve with timeouts and bounds
// (connections, requests a second: internal/connlimit) that keep stuck or
// hostile clients from taking what the daemon needs, and shut down
// quickly when the daemon stops.
package loopback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/macake/macake/internal/connlimit"
)

// Limits bound every endpoint's clients: a page open in a few tabs (one
// request a second each, a few connections) and a scraper need a fraction
// of them, and what is past them cannot take the daemon's file
// descriptors or its CPU (issue 27: 20,000 idle connections left watch
// unable to run tc or answer root; a flood of /api/status pinned it at
// 97 % CPU). On loopback every local user's address is 127.0.0.1 or ::1,
// so the per-peer bound mostly keeps one address family from taking all.
var Limits = connlimit.Limits{Conns: 64, PerPeer: 48, Rate: 20, Burst: 40}

// The server's timeouts: a request is one small GET, so anything slower is
// stuck or hostile, and a connection idle for longer than idleTimeout is
// closed (one idle for less goes first when a new one needs room).
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 30 * time.Second
	maxHeaderBytes    = 8 << 10
)

// ErrNotLoopback matches (errors.Is) the error for a listen address that
// is not loopback.
var ErrNotLoopback = errors.New("not a loopback address")

// Endpoint names what is served, for the refusal: Name prefixes it
// ("metrics"), Shows says what it reveals, Remote how to reach it from
// another machine instead.
type Endpoint struct {
	Name, Shows, Remote string
}

// notLoopbackError explains the refusal: the reason matters more than the
// rule.
type notLoopbackError struct {
	ep        Endpoint
	addr, why string
}

func (e *notLoopbackError) Error() string {
	return fmt.Sprintf("%s: refusing to listen on %q: %s. The endpoint has no authentication "+
		"and %s, so it serves only on loopback (127.0.0.1, ::1 or localhost); %s", e.ep.Name, e.addr, e.why, e.ep.Shows, e.ep.Remote)
}

func (e *notLoopbackError) Is(target error) bool { return target == ErrNotLoopback }

// check accepts host:port where host is a loopback IP or "localhost". Any
// other name is refused: it could resolve to anything.
func (ep Endpoint) check(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: listen address %q: want host:port, e.g. 127.0.0.1:9846: %w", ep.Name, addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if host == "" {
		return &notLoopbackError{ep, addr, "an empty host means every interface"}
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return &notLoopbackError{ep, addr, fmt.Sprintf("%q is a host name, which could resolve to any address", host)}
	case ip.IsUnspecified():
		return &notLoopbackError{ep, addr, ip.String() + " means every interface"}
	case !ip.IsLoopback():
		return &notLoopbackError{ep, addr, ip.String() + " is not a loopback address"}
	}
	return nil
}

// Listen opens the endpoint's TCP listener, refusing any address that is
// not loopback (an error wrapping ErrNotLoopback). Port 0 picks a free
// port; the listener's Addr says which.
func (ep Endpoint) Listen(addr string) (net.Listener, error) {
	if err := ep.check(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", ep.Name, addr, err)
	}
	// "localhost" is resolved by the system; make sure it meant loopback.
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, &notLoopbackError{ep, addr, "it resolved to " + ln.Addr().String() + ", which is not a loopback address"}
	}
	return ln, nil
}

// HostIsLoopback reports whether a request's Host names this machine's
// loopback: "localhost" or a loopback address, with or without a port. A
// page elsewhere that rebinds its DNS name to 127.0.0.1 still sends its
// own name, so this is what keeps it from reading an endpoint.
func HostIsLoopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Handler wraps h with what every endpoint checks first, one rule for all
// of them: a request whose Host is not a loopback name gets 421 (DNS
// rebinding), and one past Limits' rate gets 429. Serve uses it.
func (ep Endpoint) Handler(h http.Handler) http.Handler {
	rate := connlimit.NewBucket(Limits.Rate, Limits.Burst)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HostIsLoopback(r.Host) {
			http.Error(w, "the "+ep.Name+" answers only requests for localhost, 127.0.0.1 or [::1]", http.StatusMisdirectedRequest)
			return
		}
		if !rate.Allow(time.Now()) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests; the "+ep.Name+" answers a few a second", http.StatusTooManyRequests)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Serve serves h (through Handler) on ln, within Limits, until ctx is
// done, then shuts down, giving a request in flight two seconds (the
// daemon's stop must stay quick: launchd's ExitTimeOut). It closes ln,
// logs the server's own trouble to log (nil: nowhere), and returns nil
// after ctx ends, or why serving failed.
func (ep Endpoint) Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	held := connlimit.NewListener(ln, Limits, nil)
	srv := &http.Server{
		Handler:           ep.Handler(h),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnState:         func(c net.Conn, s http.ConnState) { held.SetIdle(c, s == http.StateIdle) },
	}
	if log != nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(held) }()
	select {
	case err := <-done:
		return fmt.Errorf("%s: serve on %s: %w", ep.Name, ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	<-done
	return nil
}
