// SPDX-License-Identifier: Apache-2.0

// Package statuspage is the live status page `macake watch` serves when
// macake.toml sets status_page_listen: per link the shaper's and the
// achieved rates, the idle baseline and the round trip over the last ten
// minutes as charts that update every second, the controller's state, the
// shapers' counters and the daemon's last events.
//
// It changes one thing only, and only when the daemon settings allow it
// (status_page_control): its pause and resume buttons POST to
// /api/pause, which the daemon carries out (Daemon.SetPause). Such a POST
// must carry the page's per-daemon token (a random secret in the page,
// which another site cannot read), come from the page's own origin
// (Origin and Sec-Fetch-Site) and ask in JSON (so a cross-site form or a
// plain fetch cannot send it without a preflight, which is never
// approved). Everything else is GET and HEAD only. It serves only on
// loopback (internal/loopback), answers only requests addressed to a
// loopback name (a page elsewhere cannot reach it by DNS rebinding), and
// loads nothing from anywhere else: the page, its script and its style are
// embedded, and the Content-Security-Policy forbids everything but them
// and the page's own API.
package statuspage

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/macake/macake/config"
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

// Pauser carries out a pause or resume the page asks for
// (daemon.Daemon.SetPause).
type Pauser func(ctx context.Context, c statusapi.PauseChange) (*statusapi.Pause, error)

// Options are what the page serves.
type Options struct {
	// Status answers the page's status requests.
	Status Source
	// Pause carries out the pause and resume buttons; nil serves the page
	// read-only, without them.
	Pause Pauser
	// Token is the per-daemon secret the page carries and each pause
	// request must send back; "" makes a random one.
	Token string
}

// TokenHeader is the request header a pause request carries the page's
// token in.
const TokenHeader = "X-Macake-Token"

// pageBy is who asked, as status and the log name a pause from the page.
const pageBy = "the status page"

// page is index.html, with the token in it when the buttons are on.
var page = template.Must(template.ParseFS(assets, "assets/index.html"))

// Handler serves the page: / (the page), /app.js, /app.css,
// /api/status[?since=UNIX_MS] (the status document with each link's
// history after since, and the last events) and, with o.Pause, POST
// /api/pause.
func Handler(o Options) http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded directory is part of the build
	}
	if o.Pause != nil && o.Token == "" {
		o.Token = newToken()
	}
	static := http.FileServerFS(files)
	mux := http.NewServeMux()
	for _, path := range []string{"/app.js", "/app.css"} {
		mux.Handle("GET "+path, static)
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		token := ""
		if o.Pause != nil {
			token = o.Token
		}
		if err := page.Execute(w, struct{ Token string }{token}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	if o.Pause != nil {
		mux.Handle("POST /api/pause", pauseHandler(o))
	}
	src := o.Status
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
	return guard(mux, o.Pause != nil)
}

// newToken is a fresh per-daemon secret: 128 random bits.
func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// pauseRequest is what the page's buttons send: the link ("" every link)
// and how long, 0 to resume.
type pauseRequest struct {
	Link    string  `json:"link"`
	Seconds float64 `json:"seconds"`
}

// pauseAnswer is what /api/pause answers: the pause in force after it, or
// why not.
type pauseAnswer struct {
	Pause *statusapi.Pause `json:"pause"`
	Error string           `json:"error,omitempty"`
}

// maxPauseBody bounds a pause request: it is a few dozen bytes.
const maxPauseBody = 1024

// pauseHandler carries out a pause request from the page, once it is
// sure the page sent it: the same origin (Origin, and Sec-Fetch-Site when
// the browser sends it), JSON, and the page's token. Each refusal says
// why, in the body and with the status code.
func pauseHandler(o Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := func(code int, a pauseAnswer) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(a)
		}
		refuse := func(code int, format string, args ...any) {
			answer(code, pauseAnswer{Error: fmt.Sprintf(format, args...)})
		}
		if origin := r.Header.Get("Origin"); origin != "http://"+r.Host {
			refuse(http.StatusForbidden, "a pause must come from the status page itself (origin %q, want %q)", origin, "http://"+r.Host)
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
			refuse(http.StatusForbidden, "a pause must come from the status page itself (Sec-Fetch-Site %q)", site)
			return
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			refuse(http.StatusUnsupportedMediaType, "a pause request is JSON (Content-Type application/json)")
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(o.Token)) != 1 {
			refuse(http.StatusForbidden, "a pause request must carry the page's token in %s; reload the page (the daemon restarted?)", TokenHeader)
			return
		}
		var req pauseRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPauseBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			refuse(http.StatusBadRequest, "the pause request is not {\"link\": NAME or \"\", \"seconds\": N}: %v", err)
			return
		}
		switch s := req.Seconds; {
		case math.IsNaN(s) || s < 0 || s > float64(math.MaxInt64/int64(time.Second)):
			refuse(http.StatusBadRequest, "seconds %v: a pause lasts 0 (resume) or more seconds", s)
			return
		case req.Link != "" && !config.ValidLinkName(req.Link):
			refuse(http.StatusBadRequest, "link %q cannot name a link", req.Link)
			return
		}
		p, err := o.Pause(r.Context(), statusapi.PauseChange{Link: req.Link, For: time.Duration(req.Seconds * float64(time.Second)), By: pageBy})
		if err != nil {
			answer(http.StatusConflict, pauseAnswer{Error: err.Error()})
			return
		}
		answer(http.StatusOK, pauseAnswer{Pause: p})
	})
}

// guard refuses what the page must not answer: methods that could
// change something (but the pause requests, when control is on). Every
// answer carries the security headers. Requests whose Host is not a
// loopback name, and those past the rate, are the endpoint's to refuse
// (loopback.Endpoint.Handler), for the metrics as for the page.
func guard(next http.Handler, control bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		switch {
		case control && r.URL.Path == "/api/pause" && r.Method == http.MethodPost:
		case control && r.URL.Path == "/api/pause":
			h.Set("Allow", "POST")
			http.Error(w, "/api/pause takes POST only", http.StatusMethodNotAllowed)
			return
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
		default:
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the status page changes nothing but through its pause buttons", http.StatusMethodNotAllowed)
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

// Serve listens on addr (loopback only) and serves the page as o says
// until ctx ends. It returns nil after ctx ends, or why it cannot serve.
func Serve(ctx context.Context, addr string, o Options, log *slog.Logger) error {
	ln, err := Endpoint.Listen(addr)
	if err != nil {
		return err
	}
	if log != nil {
		log.Info("serving the status page", "url", "http://"+ln.Addr().String()+"/", "pause_buttons", o.Pause != nil)
	}
	return Endpoint.Serve(ctx, ln, Handler(o), log)
}
