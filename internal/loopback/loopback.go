// SPDX-License-Identifier: Apache-2.0

// Package loopback serves macake's HTTP endpoints (the Prometheus metrics,
// the status page): they have no authentication and show the user's
// networks and traffic, so they listen only on loopback, serve with
// timeouts that end stuck or hostile clients, and shut down quickly when
// the daemon stops.
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

// Serve serves h on ln until ctx is done, then shuts down, giving a
// request in flight two seconds (the daemon's stop must stay quick:
// launchd's ExitTimeOut). It closes ln, logs the server's own trouble to
// log (nil: nowhere), and returns nil after ctx ends, or why serving
// failed.
func (ep Endpoint) Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{
		Handler: h,
		// A request is one small GET; anything slower is stuck or hostile.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if log != nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
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
