// SPDX-License-Identifier: Apache-2.0

package connlimit

import (
	"net"
	"sync"
	"testing"
	"time"
)

// TestListenerBounds: past the per-peer and total bounds a connection is
// closed at once, unless an idle one can go to make room; a privileged
// peer is held apart from the total.
func TestListenerBounds(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var mu sync.Mutex
	peers := map[string]bool{} // by the client's local port: privileged
	peerOf := func(c net.Conn) (string, bool) {
		_, port, _ := net.SplitHostPort(c.RemoteAddr().String())
		mu.Lock()
		defer mu.Unlock()
		if peers[port] {
			return "root", true
		}
		return "user", false
	}
	l := NewListener(raw, Limits{Conns: 3, PerPeer: 3}, peerOf)
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func(privileged bool) net.Conn {
		t.Helper()
		var d net.Dialer
		if privileged {
			// Known as privileged before the server can accept it: from
			// a port chosen (and marked) before dialling.
			free, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			free.Close()
			_, port, _ := net.SplitHostPort(free.Addr().String())
			mu.Lock()
			peers[port] = true
			mu.Unlock()
			d.LocalAddr = free.Addr()
		}
		c, err := d.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	next := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("nothing accepted")
		}
		return nil
	}
	var server []net.Conn
	for range 3 {
		dial(false)
		c := next()
		l.SetIdle(c, false)
		server = append(server, c)
	}
	// A fourth: none idle, so it is closed without being accepted.
	c4 := dial(false)
	c4.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c4.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection over the bound was kept open")
	}
	if s := l.Stats(); s.Held != 3 || s.Refused != 1 {
		t.Errorf("stats %+v, want 3 held and 1 refused", s)
	}
	// One goes idle: the next one takes its place.
	l.SetIdle(server[1], true)
	dial(false)
	next()
	if s := l.Stats(); s.Held != 3 || s.Evicted != 1 {
		t.Errorf("stats %+v, want 3 held and 1 evicted", s)
	}
	server[1].SetReadDeadline(time.Now().Add(time.Second))
	if _, err := server[1].Read(make([]byte, 1)); err == nil {
		t.Error("the evicted connection is still open")
	}
	// A privileged peer is not kept out by the total.
	dial(true)
	next()
	if s := l.Stats(); s.Held != 4 {
		t.Errorf("stats %+v, want the privileged connection held too", s)
	}
	// Closing makes room.
	server[0].Close()
	dial(false)
	next()
	if s := l.Stats(); s.Held != 4 || s.Refused != 1 {
		t.Errorf("stats %+v after a close, want 4 held and still 1 refused", s)
	}
}

// TestBucket: Rate a second on average, Burst at once.
func TestBucket(t *testing.T) {
	b := NewBucket(10, 3)
	now := time.Unix(0, 0)
	for i := range 3 {
		if !b.Allow(now) {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	if b.Allow(now) {
		t.Fatal("a fourth request at once allowed")
	}
	if !b.Allow(now.Add(100 * time.Millisecond)) {
		t.Fatal("a request 100 ms later refused at 10 a second")
	}
	if b.Allow(now.Add(150 * time.Millisecond)) {
		t.Fatal("a request 50 ms after that allowed at 10 a second")
	}
	bs := NewBuckets(Limits{Rate: 1, Burst: 1})
	if !bs.Allow("a", now) || bs.Allow("a", now) || !bs.Allow("b", now) {
		t.Error("per-peer buckets are not per peer")
	}
}
