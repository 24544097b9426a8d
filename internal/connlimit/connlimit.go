// SPDX-License-Identifier: Apache-2.0

// Package connlimit bounds what the clients of the daemon's endpoints (the
// status page, the metrics and the status socket) can take from it:
// connections held at once, in all and per peer, and requests a second.
// Any local user may connect to the HTTP endpoints; without bounds, 20,000
// idle keep-alive connections took every file descriptor `watch` had, so
// it could no longer run tc, write its state file or answer root (issue
// 27). A connection over a bound is closed as soon as it is accepted, so
// it costs a moment, not a descriptor; an idle one is closed first to make
// room, so idle connections cannot keep a new client out.
package connlimit

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// Limits are an endpoint's bounds.
type Limits struct {
	// Conns is how many connections are held at once, PerPeer how many of
	// them one peer may hold.
	Conns, PerPeer int
	// Rate is the requests a second a peer (Buckets) or the endpoint
	// (Bucket) may make on average, Burst how many at once.
	Rate  float64
	Burst int
}

// Peer names a connection's peer, for the per-peer bound: its address, or
// its user on a Unix socket. privileged peers (root asking the status
// socket) are held apart: they count toward neither the total bound nor
// anyone else's, only toward their own PerPeer.
type Peer func(c net.Conn) (key string, privileged bool)

// Listener is a net.Listener whose Accept returns only the connections
// within its Limits.
type Listener struct {
	net.Listener
	lim  Limits
	peer Peer

	mu      sync.Mutex
	held    map[*Conn]bool // the connections held, and whether idle
	total   int            // held connections of unprivileged peers
	perPeer map[string]int
	// refused and evicted count the connections closed for the bounds.
	refused, evicted uint64
}

// NewListener bounds ln's connections by lim; peer names each one's peer
// (nil: its remote address, without the port).
func NewListener(ln net.Listener, lim Limits, peer Peer) *Listener {
	if peer == nil {
		peer = RemoteHost
	}
	return &Listener{Listener: ln, lim: lim, peer: peer, held: map[*Conn]bool{}, perPeer: map[string]int{}}
}

// RemoteHost is a Peer: the remote address without its port.
func RemoteHost(c net.Conn) (string, bool) {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String(), false
	}
	return host, false
}

// Accept returns the next connection within the limits; those over them
// are closed (after closing an idle one to make room, when there is one)
// without being returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, privileged := l.peer(c)
		if tc, ok := l.admit(c, key, privileged); ok {
			return tc, nil
		}
		c.Close()
	}
}

// admit holds c when the limits allow it, evicting an idle connection if
// that makes room.
func (l *Listener) admit(c net.Conn, key string, privileged bool) (*Conn, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	full := func() (bool, string) {
		switch {
		case l.perPeer[key] >= l.lim.PerPeer:
			return true, key
		case !privileged && l.total >= l.lim.Conns:
			return true, ""
		}
		return false, ""
	}
	for {
		over, of := full()
		if !over {
			break
		}
		if !l.evictIdleLocked(of) {
			l.refused++
			return nil, false
		}
	}
	// Idle until it is known to be busy (SetIdle): a connection that has
	// sent nothing yet holds its place no better than one waiting between
	// requests, or connections that never send would keep everyone out.
	tc := &Conn{Conn: c, l: l, key: key, privileged: privileged, idleSince: time.Now()}
	l.held[tc] = true
	l.perPeer[key]++
	if !privileged {
		l.total++
	}
	return tc, true
}

// evictIdleLocked closes the longest idle held connection of peer key, or
// when key is "" of any unprivileged peer (a privileged one does not
// count toward the total); false when none is idle.
func (l *Listener) evictIdleLocked(key string) bool {
	var oldest *Conn
	for c, idle := range l.held {
		mine := c.key == key || (key == "" && !c.privileged)
		if idle && mine && (oldest == nil || c.idleSince.Before(oldest.idleSince)) {
			oldest = c
		}
	}
	if oldest == nil {
		return false
	}
	l.releaseLocked(oldest)
	l.evicted++
	// The server reading it sees it closed and closes it again, which
	// finds its place already given up.
	oldest.Conn.Close()
	return true
}

func (l *Listener) releaseLocked(c *Conn) {
	if _, ok := l.held[c]; !ok {
		return
	}
	delete(l.held, c)
	if l.perPeer[c.key]--; l.perPeer[c.key] <= 0 {
		delete(l.perPeer, c.key)
	}
	if !c.privileged {
		l.total--
	}
}

// SetIdle marks c idle (waiting for its next request, which an HTTP
// server's ConnState reports) or busy (a request is being read or
// answered). Idle connections, and new ones that have not been marked
// busy, are the first to go when a new one needs room. A Listener whose
// owner never calls SetIdle treats every connection as idle: a new one
// always finds room while its peer is within PerPeer.
func (l *Listener) SetIdle(c net.Conn, idle bool) {
	tc, ok := c.(*Conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, held := l.held[tc]; held {
		l.held[tc] = idle
		if idle {
			tc.idleSince = time.Now()
		}
	}
}

// Stats are a Listener's counts.
type Stats struct {
	// Held are the connections held now; Refused and Evicted those closed
	// for the limits since the start (over them, and idle to make room).
	Held             int
	Refused, Evicted uint64
}

// Stats returns the listener's counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Held: len(l.held), Refused: l.refused, Evicted: l.evicted}
}

// Conn is a held connection; closing it makes room for another.
type Conn struct {
	net.Conn
	l          *Listener
	key        string
	privileged bool
	idleSince  time.Time
	once       sync.Once
}

// SyscallConn is the underlying connection's, so that a Unix socket's
// peer credentials can still be read through the wrapper.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("the connection has no descriptor")
	}
	return sc.SyscallConn()
}

// Close closes the connection and lets go of its place.
func (c *Conn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.releaseLocked(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// Bucket is a token bucket: Rate requests a second on average, Burst at
// once. Safe for concurrent use.
type Bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// NewBucket returns a full bucket.
func NewBucket(rate float64, burst int) *Bucket {
	return &Bucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// Allow takes a token at now, reporting whether there was one.
func (b *Bucket) Allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Buckets are a Bucket per peer, for endpoints whose peers can be told
// apart (the status socket's users). Safe for concurrent use.
type Buckets struct {
	mu    sync.Mutex
	lim   Limits
	peers map[string]*Bucket
}

// maxBuckets bounds the peers remembered; past it the buckets start over
// (full), which a peer can only use to get one burst more.
const maxBuckets = 1024

// NewBuckets returns per-peer buckets of lim's Rate and Burst.
func NewBuckets(lim Limits) *Buckets { return &Buckets{lim: lim, peers: map[string]*Bucket{}} }

// Allow takes a token from key's bucket at now.
func (bs *Buckets) Allow(key string, now time.Time) bool {
	bs.mu.Lock()
	b := bs.peers[key]
	if b == nil {
		if len(bs.peers) >= maxBuckets {
			clear(bs.peers)
		}
		b = NewBucket(bs.lim.Rate, bs.lim.Burst)
		bs.peers[key] = b
	}
	bs.mu.Unlock()
	return b.Allow(now)
}
