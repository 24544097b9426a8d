// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSocketRoundTrip: the daemon's side answers a status request with
// the current snapshot; the socket has mode 0660; a clean stop removes it,
// after which Fetch says the daemon is not running.
func TestSocketRoundTrip(t *testing.T) {
	path := SocketPath(t.TempDir())
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != SocketMode {
		t.Fatalf("socket mode: %v %v, want %o", info.Mode(), err, SocketMode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	n := 0
	go func() {
		served <- Serve(ctx, ln, func() Status {
			n++
			return Status{FormatVersion: FormatVersion, Daemon: Daemon{Running: true, PID: 42}, Links: []Link{{Name: "wan"}}}
		}, nil)
	}()
	for i := range 2 {
		st, err := Fetch(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Daemon.Running || st.Daemon.PID != 42 || len(st.Links) != 1 || st.Links[0].Name != "wan" {
			t.Fatalf("request %d: %+v", i, st)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left behind after a clean stop: %v", err)
	}
	if _, err := Fetch(context.Background(), path); !errors.Is(err, ErrNotRunning) {
		t.Errorf("after stop: %v, want ErrNotRunning", err)
	}
}

// TestListenReplacesAStaleSocket: a socket left by a daemon that was
// killed answers nothing; the next daemon replaces it, and until then
// Fetch says nobody runs.
func TestListenReplacesAStaleSocket(t *testing.T) {
	path := SocketPath(t.TempDir())
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // as a kill -9 leaves it: the file without a listener
	if _, err := Fetch(context.Background(), path); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("stale socket: %v, want ErrNotRunning", err)
	}
	ln, err := Listen(path)
	if err != nil {
		t.Fatalf("replacing the stale socket: %v", err)
	}
	defer ln.Close()
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "answers on it") {
		t.Errorf("a second Listen on a live socket: %v", err)
	}
}

// TestServeRejectsBadRequests: a request in another major version or for
// something else gets an error that says so.
func TestServeRejectsBadRequests(t *testing.T) {
	path := SocketPath(t.TempDir())
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	go Serve(t.Context(), ln, func() Status { return Status{} }, nil)
	for req, want := range map[string]string{
		`{"format_version":"2.0","request":"status"}`: "speaks 1.0",
		`{"format_version":"1.0","request":"stop"}`:   `unknown request`,
		`not json`: "not JSON",
	} {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(req + "\n"))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.Contains(line, want) || !strings.Contains(line, `"format_version":"1.0"`) {
			t.Errorf("%s: answer %q, want it to contain %q", req, line, want)
		}
	}
}
