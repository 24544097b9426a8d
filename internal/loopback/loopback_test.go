// SPDX-License-Identifier: Apache-2.0

package loopback

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

var testEndpoint = Endpoint{Name: "test endpoint", Shows: "nothing", Remote: "nothing"}

// serve serves a handler that answers "ok" on a loopback port until the
// test ends, and returns its address.
func serve(t *testing.T) string {
	t.Helper()
	ln, err := testEndpoint.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- testEndpoint.Serve(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

// get sends one request with host as its Host over c and returns the
// status code.
func get(t *testing.T, c net.Conn, host string) int {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHostMustBeLoopback: a request whose Host is not a loopback name (a
// page that rebound its DNS name to 127.0.0.1) is refused, by every
// endpoint alike.
func TestHostMustBeLoopback(t *testing.T) {
	addr := serve(t)
	for host, want := range map[string]int{
		addr: 200, "localhost": 200, "[::1]:9846": 200, "127.0.0.2": 200,
		"attacker.example:9846": 421, "192.168.1.20": 421, "localhost.attacker.example": 421, "": 421,
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, c, host); got != want {
			t.Errorf("Host %q: %d, want %d", host, got, want)
		}
		c.Close()
	}
}

// TestRequestRate: past the burst, requests get 429 until the rate lets
// them through again.
func TestRequestRate(t *testing.T) {
	addr := serve(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	codes := map[int]int{}
	for range Limits.Burst + 20 {
		codes[get(t, c, "localhost")]++
	}
	if codes[200] < Limits.Burst || codes[429] == 0 {
		t.Errorf("%d requests at once: %v, want the burst (%d) answered and the rest 429", Limits.Burst+20, codes, Limits.Burst)
	}
}

// TestIdleConnectionsCannotKeepAClientOut: connections held idle (a
// thousand, far past the bound) are closed to make room, so the endpoint
// keeps no more than its bound and a new client is still answered.
func TestIdleConnectionsCannotKeepAClientOut(t *testing.T) {
	addr := serve(t)
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 1000 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	// Let the server take them in and make them idle (one request each
	// on the first few, which then wait for the next).
	for _, c := range idle[:10] {
		get(t, c, "localhost")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := get(t, c, "localhost"); got != 200 {
		t.Errorf("a new client after 1000 idle connections: %d", got)
	}
	// Most of the thousand were closed by the server.
	closed := 0
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF || (err != nil && strings.Contains(err.Error(), "reset")) {
			closed++
		}
	}
	if closed < 1000-Limits.Conns {
		t.Errorf("%d of 1000 idle connections closed by the server, want all but at most %d", closed, Limits.Conns)
	}
}
