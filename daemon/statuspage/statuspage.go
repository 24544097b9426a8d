// SPDX-License-Identifier: Apache-2.0

// Package statuspage is the live status page `macake watch` serves when
// macake.toml sets status_page_listen: per link the shaper's and the
// achieved rates, the idle baseline and the round trip over the last ten
// minutes as charts that update every second, the controller's state, the
// shapers' counters and the daemon's last events.
//
// It is read-only (GET and HEAD only; nothing it serves changes
// anything), serves only on loopback (internal/loopback), answers only
// requests addressed to a loopback name (a page elsewhere cannot reach it
// by DNS rebinding), and loads nothing from anywhere else: the page, its
// script and its style are embedded, and the Content-Security-Policy
// forbids everything but them and the page's own status API.
package statuspage

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/loopback"
)

//go:embed assets
var assets embed.FS

// Source answers the page's status requests: the daemon's status with
// what the query asks for (daemon.Daemon.Query).
type Source func(ctx context.Context, q statusapi.Query) statusapi.Status

// csp allows the page its own script, style and API, and nothing else.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page: / (the page), /app.js, /app.css and
// /api/status[?since=UNIX_MS] (the status document with each link's
// history after since, and the last events).
func Handler(src Source) http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded directory is part of the build
	}
	static := http.FileServerFS(files)
	mux := http.NewServeMux()
	for _, path := range []string{"/{$}", "/app.js", "/app.css"} {
		mux.Handle("GET "+path, static)
	}
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		q := statusapi.Query{History: true, Events: true}
		if s := r.URL.Query().Get("since"); s != "" {
			ms, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				http.Error(w, "since: want Unix milliseconds", http.StatusBadRequest)
				return
			}
			q.Since = time.UnixMilli(ms)
		}
		st := src(r.Context(), q)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(st)
	})
	return guard(mux)
}

// guard refuses what a read-only page must not answer: methods that
// could change something. Every answer carries the security headers.
// Requests whose Host is not a loopback name, and those past the rate,
// are the endpoint's to refuse (loopback.Endpoint.Handler), for the
// metrics as for the page.
func guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the status page is read-only", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Endpoint is how the page is served: on loopback only.
var Endpoint = loopback.Endpoint{
	Name:   "status page",
	Shows:  "it shows your networks and your traffic",
	Remote: "to see it from another machine, use an SSH tunnel (ssh -L 9847:127.0.0.1:9847 THIS-MAC)",
}

// Serve listens on addr (loopback only) and serves the page from src
// until ctx ends. It returns nil after ctx ends, or why it cannot serve.
func Serve(ctx context.Context, addr string, src Source, log *slog.Logger) error {
	ln, err := Endpoint.Listen(addr)
	if err != nil {
		return err
	}
	if log != nil {
		log.Info("serving the status page", "url", "http://"+ln.Addr().String()+"/")
	}
	return Endpoint.Serve(ctx, ln, Handler(src), log)
}
