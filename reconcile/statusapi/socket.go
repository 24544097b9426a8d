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
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// SocketName is the status socket's name inside the state directory.
const SocketName = "watch.sock"

// SocketMode lets root and the socket's group (admin on macOS) ask.
const SocketMode = 0o660

// SocketPath returns the status socket of the daemon whose state directory
// is stateDir.
func SocketPath(stateDir string) string { return filepath.Join(stateDir, SocketName) }

// RequestStatus is the one request the socket answers.
const RequestStatus = "status"

// Request is the line a client sends.
type Request struct {
	FormatVersion string `json:"format_version"`
	Request       string `json:"request"`
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

// Serve answers status requests on ln until ctx ends, then closes ln.
// snapshot is called once per request, from the connection's goroutine.
// log hears about broken exchanges; nil discards them.
func Serve(ctx context.Context, ln net.Listener, snapshot func() Status, log *slog.Logger) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
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
			if err := answer(c, snapshot); err != nil && log != nil {
				log.Debug("status request failed", "error", err)
			}
		}()
	}
}

// answer reads one request and writes one response.
func answer(c net.Conn, snapshot func() Status) error {
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
	case req.Request != RequestStatus:
		resp.Error = fmt.Sprintf("unknown request %q; the only one is %q", req.Request, RequestStatus)
	default:
		st := snapshot()
		resp.Status = &st
	}
	return json.NewEncoder(c).Encode(resp)
}

// Fetch asks the daemon behind the socket at path for its status. Its
// errors match ErrNotRunning when nothing answers and ErrPermission when
// this user may not ask.
func Fetch(ctx context.Context, path string) (Status, error) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	c, err := d.DialContext(dctx, "unix", path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return Status{}, fmt.Errorf("%w (nothing answers on %s)", ErrNotRunning, path)
	case errors.Is(err, fs.ErrPermission):
		return Status{}, fmt.Errorf("%w: %s is readable by root and the admin group only; run with sudo", ErrPermission, path)
	case err != nil:
		return Status{}, fmt.Errorf("asking macake watch on %s: %w", path, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	if err := json.NewEncoder(c).Encode(Request{FormatVersion: FormatVersion, Request: RequestStatus}); err != nil {
		return Status{}, fmt.Errorf("asking macake watch on %s: %w", path, err)
	}
	var resp Response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return Status{}, fmt.Errorf("reading the answer of macake watch on %s: %w", path, err)
	}
	if major(resp.FormatVersion) != major(FormatVersion) {
		return Status{}, fmt.Errorf("macake watch on %s answers in format %q; this macake reads %s: run the same macake version for both", path, resp.FormatVersion, FormatVersion)
	}
	if resp.Error != "" {
		return Status{}, fmt.Errorf("macake watch on %s: %s", path, resp.Error)
	}
	if resp.Status == nil {
		return Status{}, fmt.Errorf("macake watch on %s sent no status", path)
	}
	return *resp.Status, nil
}

// major returns the part of a version before the first dot.
func major(v string) string {
	m, _, _ := strings.Cut(v, ".")
	return m
}
