// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/macake/macake/internal/connlimit"
	"github.com/macake/macake/state"
)

// SocketName is the status socket's name inside the state directory.
const SocketName = "watch.sock"

// SocketMode lets root and the socket's group (admin on macOS) ask.
const SocketMode = 0o660

// The requests the socket answers.
const (
	// RequestStatus asks for the Status document; anyone who may connect
	// may ask.
	RequestStatus = "status"
	// RequestMeasurement hands the daemon a profile `macake measure`
	// measured while the daemon held the state lock; only root (or the
	// daemon's own user) may send it.
	RequestMeasurement = "measurement"
	// RequestPause takes macake's shaping off for PauseSeconds (0: puts it
	// back now), for `macake bench --compare`; only root (or the daemon's
	// own user) may send it.
	RequestPause = "pause"
)

// Request is the line a client sends.
type Request struct {
	FormatVersion string `json:"format_version"`
	Request       string `json:"request"`
	// Measurement is the profile of a RequestMeasurement.
	Measurement *Measurement `json:"measurement,omitempty"`
	// History and HistorySince ask a RequestStatus for each link's recent
	// history (after HistorySince, when set); Events for the last log
	// lines (Query).
	History      bool      `json:"history,omitempty"`
	HistorySince time.Time `json:"history_since,omitzero"`
	Events       bool      `json:"events,omitempty"`
	// PauseSeconds is a RequestPause's length.
	PauseSeconds float64 `json:"pause_seconds,omitempty"`
}

// Measurement is what `macake measure` found on one network, for the
// daemon to record in the state file (state.State.RecordMeasurement).
type Measurement struct {
	// Key is the profile's key (state.ProfileKey).
	Key     string        `json:"key"`
	Profile state.Profile `json:"profile"`
}

// Handler answers the socket's requests.
type Handler struct {
	// Status returns the daemon's status with what the request asked for;
	// it is called once per status request, from the connection's
	// goroutine.
	Status func(ctx context.Context, q Query) Status
	// Measurement records a measurement and returns once it is saved;
	// nil refuses measurements.
	Measurement func(ctx context.Context, m Measurement) error
	// Pause takes the shaping off for d (d ≤ 0: back on) and returns once
	// that is done; nil refuses pauses.
	Pause func(ctx context.Context, d time.Duration) error
}

// Response is the document the daemon answers with: the status, or an
// error that says why not.
type Response struct {
	FormatVersion string  `json:"format_version"`
	Status        *Status `json:"status,omitempty"`
	Error         string  `json:"error,omitempty"`
}

// Errors of Fetch, matched with errors.Is.
var (
	// ErrNotRunning: nothing listens on the socket (no daemon, or one that
	// was killed and left its socket behind).
	ErrNotRunning = errors.New("macake watch is not running")
	// ErrPermission: the socket exists but this user may not connect.
	ErrPermission = errors.New("no permission to ask macake watch")
)

// ioTimeout bounds one exchange on either side: the status is a few
// kilobytes, so anything slower is stuck.
const ioTimeout = 5 * time.Second

// pauseTimeout bounds a pause exchange, which waits for the reconcile that
// takes the shaping off or puts it back: a few dnctl or tc calls each, but
// on a busy machine those can take seconds.
const pauseTimeout = time.Minute

// Listen creates the status socket at path: it removes a socket left by a
// daemon that died (nothing answers on it) and refuses to replace one that
// answers; it sets SocketMode and, when running as root, the group that
// may read it (admin on macOS). The state lock (one daemon per state
// directory) makes a live socket unexpected.
func Listen(path string) (net.Listener, error) {
	if info, err := os.Lstat(path); err == nil {
		if info.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("status socket %s: exists and is not a socket; remove it", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("status socket %s: another macake watch answers on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("status socket %s: removing the stale socket: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("status socket: %w", err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		// Close removes the file, so a daemon that exits cleanly leaves
		// none behind.
		ul.SetUnlinkOnClose(true)
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("status socket %s: %w", path, err)
	}
	if os.Geteuid() == 0 {
		if gid, ok := socketGroup(); ok {
			if err := os.Chown(path, 0, gid); err != nil {
				ln.Close()
				return nil, fmt.Errorf("status socket %s: %w", path, err)
			}
		}
	}
	return ln, nil
}

// SocketLimits bound the socket's clients (internal/connlimit): per user,
// a few connections at once and a few requests a second, which `macake
// status`, measure and bench need a fraction of. Root and the daemon's
// own user are held apart, so no other user can keep them out, and are
// not held to the rate.
var SocketLimits = connlimit.Limits{Conns: 32, PerPeer: 8, Rate: 5, Burst: 10}

// socketPeer names a socket connection's peer by its user; root and the
// daemon's own user are privileged. A peer whose user cannot be read is
// one peer, "unknown".
func socketPeer(c net.Conn) (string, bool) {
	uid, err := peerUID(c)
	if err != nil {
		return "unknown", false
	}
	return fmt.Sprintf("uid %d", uid), uid == 0 || uid == os.Geteuid()
}

// Serve answers requests on ln with h, within SocketLimits, until ctx
// ends, then closes ln. log hears about broken exchanges; nil discards
// them.
func Serve(ctx context.Context, ln net.Listener, h Handler, log *slog.Logger) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	held := connlimit.NewListener(ln, SocketLimits, socketPeer)
	rate := connlimit.NewBuckets(SocketLimits)
	for {
		c, err := held.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("status socket: %w", err)
		}
		go func() {
			// Root (and the daemon's own user) is not held to the rate:
			// `status --follow` asks as often as it likes, and nothing
			// root sends needs bounding from root.
			peer, privileged := socketPeer(c)
			if !privileged && !rate.Allow(peer, time.Now()) {
				defer c.Close()
				c.SetDeadline(time.Now().Add(ioTimeout))
				json.NewEncoder(c).Encode(Response{FormatVersion: FormatVersion,
					Error: fmt.Sprintf("too many requests from %s; this macake watch answers a few a second", peer)})
				return
			}
			if err := answer(ctx, c, h); err != nil && log != nil {
				log.Debug("status request failed", "error", err)
			}
		}()
	}
}

// answer reads one request and writes one response.
func answer(ctx context.Context, c net.Conn, h Handler) error {
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	line, err := bufio.NewReaderSize(c, 4096).ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("reading the request: %w", err)
	}
	resp := Response{FormatVersion: FormatVersion}
	var req Request
	switch err := json.Unmarshal(line, &req); {
	case err != nil:
		resp.Error = fmt.Sprintf("the request is not JSON: %v", err)
	case major(req.FormatVersion) != major(FormatVersion):
		resp.Error = fmt.Sprintf("request format version %q; this macake watch speaks %s", req.FormatVersion, FormatVersion)
	case req.Request == RequestStatus:
		st := h.Status(ctx, Query{History: req.History, Since: req.HistorySince, Events: req.Events})
		resp.Status = &st
	case req.Request == RequestMeasurement:
		if err := takeMeasurement(ctx, c, h, req.Measurement); err != nil {
			resp.Error = err.Error()
		}
	case req.Request == RequestPause:
		if err := pause(ctx, c, h, req.PauseSeconds); err != nil {
			resp.Error = err.Error()
		}
	default:
		resp.Error = fmt.Sprintf("unknown request %q; use %q, %q or %q", req.Request, RequestStatus, RequestMeasurement, RequestPause)
	}
	return json.NewEncoder(c).Encode(resp)
}

// mayChange checks that the peer may change the daemon's state: the
// socket's group may read the status, but only root (or the daemon's own
// user) changes anything. what and who name the request and the command
// to run with sudo.
func mayChange(c net.Conn, what, who string) error {
	switch uid, err := peerUID(c); {
	case err != nil:
		return fmt.Errorf("cannot tell who sent the %s (%v); refused", what, err)
	case uid != 0 && uid != os.Geteuid():
		return fmt.Errorf("only root may send macake watch a %s (uid %d asked); run %s with sudo", what, uid, who)
	}
	return nil
}

// takeMeasurement checks that the peer may change the daemon's state and
// hands the measurement over.
func takeMeasurement(ctx context.Context, c net.Conn, h Handler, m *Measurement) error {
	if h.Measurement == nil {
		return errors.New("this macake watch takes no measurements")
	}
	if err := mayChange(c, "measurement", "macake measure"); err != nil {
		return err
	}
	if m == nil || m.Key == "" {
		return errors.New("the measurement request carries no profile")
	}
	ctx, cancel := context.WithTimeout(ctx, ioTimeout-time.Second)
	defer cancel()
	return h.Measurement(ctx, *m)
}

// pause checks that the peer may change the daemon's state and pauses or
// resumes the shaping.
func pause(ctx context.Context, c net.Conn, h Handler, seconds float64) error {
	if h.Pause == nil {
		return errors.New("this macake watch takes no pauses")
	}
	if err := mayChange(c, "pause", "macake bench --compare"); err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(pauseTimeout))
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout-time.Second)
	defer cancel()
	return h.Pause(ctx, time.Duration(seconds*float64(time.Second)))
}

// Fetch asks the daemon behind the socket at path for its status. Its
// errors match ErrNotRunning when nothing answers and ErrPermission when
// this user may not ask.
func Fetch(ctx context.Context, path string) (Status, error) {
	return FetchQuery(ctx, path, Query{})
}

// FetchQuery is Fetch with what q asks for besides the document.
func FetchQuery(ctx context.Context, path string, q Query) (Status, error) {
	resp, err := exchange(ctx, path, ioTimeout, Request{FormatVersion: FormatVersion, Request: RequestStatus,
		History: q.History, HistorySince: q.Since, Events: q.Events})
	if err != nil {
		return Status{}, err
	}
	if resp.Status == nil {
		return Status{}, fmt.Errorf("macake watch on %s sent no status", path)
	}
	return *resp.Status, nil
}

// SendMeasurement hands m to the daemon behind the socket at path and
// returns once the daemon has saved it. Its errors match ErrNotRunning and
// ErrPermission as Fetch's do.
func SendMeasurement(ctx context.Context, path string, m Measurement) error {
	_, err := exchange(ctx, path, ioTimeout, Request{FormatVersion: FormatVersion, Request: RequestMeasurement, Measurement: &m})
	return err
}

// SendPause asks the daemon behind the socket at path to take macake's
// shaping off for d (d ≤ 0: to put it back now) and returns once it has.
// Its errors match ErrNotRunning and ErrPermission as Fetch's do.
func SendPause(ctx context.Context, path string, d time.Duration) error {
	_, err := exchange(ctx, path, pauseTimeout, Request{FormatVersion: FormatVersion, Request: RequestPause, PauseSeconds: max(d, 0).Seconds()})
	return err
}

// exchange sends one request and reads the response within timeout.
func exchange(ctx context.Context, path string, timeout time.Duration, req Request) (Response, error) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	c, err := d.DialContext(dctx, "unix", path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return Response{}, fmt.Errorf("%w (nothing answers on %s)", ErrNotRunning, path)
	case errors.Is(err, fs.ErrPermission):
		return Response{}, fmt.Errorf("%w: %s answers %s only; run with sudo", ErrPermission, path, SocketReaders)
	case err != nil:
		return Response{}, fmt.Errorf("asking macake watch on %s: %w", path, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return Response{}, fmt.Errorf("asking macake watch on %s: %w", path, err)
	}
	var resp Response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return Response{}, fmt.Errorf("reading the answer of macake watch on %s: %w", path, err)
	}
	if major(resp.FormatVersion) != major(FormatVersion) {
		return Response{}, fmt.Errorf("macake watch on %s answers in format %q; this macake reads %s: run the same macake version for both", path, resp.FormatVersion, FormatVersion)
	}
	if resp.Error != "" {
		return Response{}, fmt.Errorf("macake watch on %s: %s", path, resp.Error)
	}
	return resp, nil
}

// major returns the part of a version before the first dot.
func major(v string) string {
	m, _, _ := strings.Cut(v, ".")
	return m
}
