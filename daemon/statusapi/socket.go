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
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/daemon/operator"
	"github.com/macake/macake/internal/connlimit"
	"github.com/macake/macake/state"
)

// BindRetry is how long watch waits before it binds its status socket
// again after binding or serving failed (what a client waiting for the
// socket is told to allow for).
const BindRetry = 30 * time.Second

// SocketName is the status socket's name inside the state directory.
const SocketName = "watch.sock"

// SocketMode lets root and the socket's group (the operator group; admin
// on macOS when there is none) ask.
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
	// RequestPause takes macake's shaping of PauseLink (every link when
	// empty) off for PauseSeconds, or puts it back (0): `macake pause`
	// and `resume`, `macake bench --compare`. Root and the operator group
	// may send it.
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
	// PauseSeconds is a RequestPause's length (0: resume); PauseLink the
	// link it pauses or resumes ("": every link).
	PauseSeconds float64 `json:"pause_seconds,omitempty"`
	PauseLink    string  `json:"pause_link,omitempty"`
}

// PauseChange is a pause or a resume as the daemon takes it.
type PauseChange struct {
	// Link is the link to pause or resume; "" for every link.
	Link string
	// For is how long the shaping stays off; 0 puts it back.
	For time.Duration
	// By says who asked, for status and the log: a user, "the status
	// page", "macake bench --compare".
	By string
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
	// Pause carries out a pause or resume and returns, once it is done,
	// the pause of that link in force after it (nil: none); nil refuses
	// pauses.
	Pause func(ctx context.Context, c PauseChange) (*Pause, error)
	// Operators says who may pause (root, the daemon's own user, the
	// operator group) and who may hand in a measurement (not the group).
	Operators operator.Policy
}

// Response is the document the daemon answers with: the status, or an
// error that says why not.
type Response struct {
	FormatVersion string  `json:"format_version"`
	Status        *Status `json:"status,omitempty"`
	// Pause answers a RequestPause: the pause of its link in force after
	// it, nil when there is none.
	Pause *Pause `json:"pause,omitempty"`
	Error string `json:"error,omitempty"`
	// Refused: the error is that the peer may not do what it asked.
	Refused bool `json:"refused,omitempty"`
}

// Errors of Fetch, matched with errors.Is.
var (
	// ErrNotRunning: nothing listens on the socket (no daemon, or one that
	// was killed and left its socket behind).
	ErrNotRunning = errors.New("macake watch is not running")
	// ErrPermission: the socket exists but this user may not connect, or
	// may not ask for what it asked (a pause without being an operator).
	ErrPermission = errors.New("no permission to ask macake watch")
)

// refusedError is the daemon's refusal of what this user asked; it
// matches ErrPermission.
type refusedError struct{ msg string }

func (e *refusedError) Error() string        { return e.msg }
func (e *refusedError) Is(target error) bool { return target == ErrPermission }

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
// may read it: the operator group ops names, else admin on macOS. The
// state lock (one daemon per state directory) makes a live socket
// unexpected.
func Listen(path string, ops operator.Policy) (net.Listener, error) {
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
		gid, ok := defaultSocketGroup()
		if ops.Group != "" {
			gid, ok = ops.GID, true
		}
		if ok {
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
	peer, err := operator.PeerOf(c)
	if err != nil {
		return "unknown", false
	}
	return fmt.Sprintf("uid %d", peer.UID), peer.UID == 0 || peer.UID == os.Geteuid()
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
			resp.Error, resp.Refused = err.Error(), errors.Is(err, operator.ErrRefused)
		}
	case req.Request == RequestPause:
		p, err := pause(ctx, c, h, req)
		if err != nil {
			resp.Error, resp.Refused = err.Error(), errors.Is(err, operator.ErrRefused)
		}
		resp.Pause = p
	default:
		resp.Error = fmt.Sprintf("unknown request %q; use %q, %q or %q", req.Request, RequestStatus, RequestMeasurement, RequestPause)
	}
	return json.NewEncoder(c).Encode(resp)
}

// takeMeasurement checks that the peer may change the daemon's state and
// hands the measurement over.
func takeMeasurement(ctx context.Context, c net.Conn, h Handler, m *Measurement) error {
	if h.Measurement == nil {
		return errors.New("this macake watch takes no measurements")
	}
	if _, err := h.Operators.Check(c, operator.Root, "measurement", "macake measure"); err != nil {
		return err
	}
	if m == nil || m.Key == "" {
		return errors.New("the measurement request carries no profile")
	}
	ctx, cancel := context.WithTimeout(ctx, ioTimeout-time.Second)
	defer cancel()
	return h.Measurement(ctx, *m)
}

// pause checks that the peer may pause (root or the operator group) and
// that the request makes sense, then pauses or resumes the shaping.
func pause(ctx context.Context, c net.Conn, h Handler, req Request) (*Pause, error) {
	if h.Pause == nil {
		return nil, errors.New("this macake watch takes no pauses")
	}
	what := "pause"
	if req.PauseSeconds == 0 {
		what = "resume"
	}
	peer, err := h.Operators.Check(c, operator.Operate, what, "macake "+what)
	if err != nil {
		return nil, err
	}
	change, err := req.pauseChange()
	if err != nil {
		return nil, err
	}
	change.By = peer.Name()
	c.SetDeadline(time.Now().Add(pauseTimeout))
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout-time.Second)
	defer cancel()
	return h.Pause(ctx, change)
}

// pauseChange reads a pause request, refusing what cannot be one: a
// negative, fractional-nanosecond or absurd length, a link that cannot
// be a link's name.
func (r Request) pauseChange() (PauseChange, error) {
	s := r.PauseSeconds
	switch {
	case math.IsNaN(s) || s < 0:
		return PauseChange{}, fmt.Errorf("pause_seconds %v: a pause lasts 0 (resume) or more seconds", s)
	case s > float64(math.MaxInt64/int64(time.Second)):
		return PauseChange{}, fmt.Errorf("pause_seconds %v is beyond any pause", s)
	}
	if r.PauseLink != "" && !config.ValidLinkName(r.PauseLink) {
		return PauseChange{}, fmt.Errorf("pause_link %q cannot name a link (lower-case letters, digits, - and _, at most 32)", r.PauseLink)
	}
	return PauseChange{Link: r.PauseLink, For: time.Duration(s * float64(time.Second))}, nil
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
// shaping of link ("": every link) off for d (d ≤ 0: to put it back now)
// and returns once it has, with the pause of that link in force after it
// (nil: none). Its errors match ErrNotRunning and ErrPermission as
// Fetch's do.
func SendPause(ctx context.Context, path, link string, d time.Duration) (*Pause, error) {
	resp, err := exchange(ctx, path, pauseTimeout, Request{FormatVersion: FormatVersion, Request: RequestPause, PauseSeconds: max(d, 0).Seconds(), PauseLink: link})
	return resp.Pause, err
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
		return Response{}, fmt.Errorf("%w: %s answers %s only; run with sudo", ErrPermission, path, Readers(path))
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
	if resp.Refused {
		return Response{}, &refusedError{fmt.Sprintf("macake watch on %s: %s", path, resp.Error)}
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
