// SPDX-License-Identifier: Apache-2.0

package speedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Endpoint says where to download from and upload to.
type Endpoint struct {
	// Name is shown to the user, e.g. "http://10.0.0.1:8080" or
	// "speed.cloudflare.com".
	Name string
	// Download returns the URL that serves n bytes.
	Download func(n int64) string
	// Upload is the URL that accepts a POST body.
	Upload string
	// Check is a URL whose GET must succeed before a test starts.
	Check string
	// Timeline is true when Upload answers with an UploadReport.
	Timeline bool
	// ChunkBytes is the largest download request (servers cap it).
	ChunkBytes int64
}

// ServerEndpoint is a server speaking this package's protocol at base
// (http or https, with an optional path prefix).
func ServerEndpoint(base string) (Endpoint, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Endpoint{}, fmt.Errorf("--server %q: want a URL like http://HOST:PORT (a server started with `macake measure --serve`)", base)
	}
	root := strings.TrimSuffix(u.String(), "/")
	return Endpoint{
		Name:       root,
		Download:   func(n int64) string { return root + "/download?bytes=" + strconv.FormatInt(n, 10) },
		Upload:     root + "/upload",
		Check:      root + "/",
		Timeline:   true,
		ChunkBytes: MaxDownload,
	}, nil
}

// Cloudflare is the default public endpoint: Cloudflare's speed test
// (https://speed.cloudflare.com), whose __down and __up endpoints many
// speed-test clients use. It caps a download at about 100 MB and answers
// uploads without a timeline.
func Cloudflare() Endpoint {
	const root = "https://speed.cloudflare.com"
	return Endpoint{
		Name:       "speed.cloudflare.com",
		Download:   func(n int64) string { return root + "/__down?bytes=" + strconv.FormatInt(n, 10) },
		Upload:     root + "/__up",
		Check:      root + "/__down?bytes=0",
		ChunkBytes: 100_000_000,
	}
}

// Host returns the endpoint's host name (for a latency probe to it).
func (e Endpoint) Host() string {
	u, err := url.Parse(e.Upload)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Config configures one load phase.
type Config struct {
	Endpoint Endpoint
	// Client does the requests (default: NewClient(nil)).
	Client *http.Client
	// Streams is the number of parallel connections (default 8).
	Streams int
	// Duration of the load (default 10 s).
	Duration time.Duration
	// Warmup is excluded from the rate estimate while TCP ramps up and the
	// queues fill (default a quarter of Duration).
	Warmup time.Duration
	// StallTimeout fails the phase when no stream makes progress for
	// this long (default 5 s, but at most half of Duration: a phase that
	// ends before its stall is noticed would report a rate of zero).
	StallTimeout time.Duration
	// Progress, if set, is called about every 250 ms with the bytes moved
	// so far and the rate over the last second (bits/s).
	Progress func(elapsed time.Duration, bytes int64, bitsPerSecond float64)
}

func (c *Config) defaults() {
	if c.Client == nil {
		c.Client = NewClient(nil)
	}
	if c.Streams <= 0 {
		c.Streams = 8
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Warmup <= 0 || c.Warmup >= c.Duration {
		c.Warmup = c.Duration / 4
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = min(5*time.Second, c.Duration/2)
	}
}

// Result is what one load phase measured.
type Result struct {
	// Direction is "download" or "upload".
	Direction string
	// Bytes is every payload byte that arrived.
	Bytes int64
	// BitsPerSecond is the steady rate: payload bits that arrived between
	// the end of the warm-up and the end of the phase, over that time.
	BitsPerSecond float64
	// Start is when the load began; SteadyFrom and SteadyTo bound the
	// window the rate covers, on this machine's clock (use it to pick
	// the latency samples taken under full load).
	Start, SteadyFrom, SteadyTo time.Time
	// Streams is the number of parallel connections.
	Streams int
}

// Dialer dials load connections with CUBIC where the OS lets a socket
// choose, and remembers which congestion control they actually got.
type Dialer struct {
	net.Dialer
	cc atomic.Value
}

// NewDialer returns a Dialer for load sockets.
func NewDialer() *Dialer {
	return &Dialer{Dialer: net.Dialer{Timeout: 10 * time.Second, Control: loadSocketControl}}
}

// DialContext dials and records the connection's congestion control.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.Dialer.DialContext(ctx, network, addr)
	if tc, ok := c.(*net.TCPConn); ok {
		if cc := Congestion(tc); cc != "" {
			d.cc.Store(cc)
		}
	}
	return c, err
}

// Congestion returns the congestion control of the last connection, or
// "" when the OS does not say (macOS, whose TCP is CUBIC).
func (d *Dialer) Congestion() string {
	s, _ := d.cc.Load().(string)
	return s
}

// NewClient returns an HTTP client for load streams: no compression, no
// connection reuse limits, and (where the OS allows choosing it) CUBIC
// congestion control on every socket, because BBR keeps queues short and
// would hide the bufferbloat being measured. dial, if set, replaces the
// dialer (tests dial from inside a network namespace).
func NewClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	if dial == nil {
		dial = NewDialer().DialContext
	}
	return &http.Client{Transport: &http.Transport{
		DialContext:           dial,
		DisableCompression:    true,
		MaxIdleConnsPerHost:   64,
		MaxConnsPerHost:       0,
		ResponseHeaderTimeout: 15 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ForceAttemptHTTP2:     false, // one TCP connection per stream
	}}
}

// Check fails unless the endpoint answers within timeout.
func Check(ctx context.Context, client *http.Client, e Endpoint, timeout time.Duration) error {
	if client == nil {
		client = NewClient(nil)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Check, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %w", e.Name, unwrapURLError(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s to GET %s", e.Name, resp.Status, e.Check)
	}
	return nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// meter counts bytes and keeps a 100 ms series of the running total.
type meter struct {
	total    atomic.Int64
	mu       sync.Mutex
	series   []point
	lastMove time.Time
}

type point struct {
	at    time.Time
	bytes int64
}

func (m *meter) add(n int) { m.total.Add(int64(n)) }

// tick records the total; it returns the time of the last change.
func (m *meter) tick(now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.total.Load()
	if len(m.series) == 0 || m.series[len(m.series)-1].bytes != b {
		m.lastMove = now
	}
	m.series = append(m.series, point{now, b})
	return m.lastMove
}

// rateBetween is the bytes counted between two times over that time.
func (m *meter) rateBetween(from, to time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := func(t time.Time) (int64, time.Time) {
		var p point
		for _, q := range m.series {
			if q.at.After(t) {
				break
			}
			p = q
		}
		return p.bytes, p.at
	}
	b0, t0 := at(from)
	b1, t1 := at(to)
	if !t1.After(t0) {
		return 0
	}
	return float64(b1-b0) * 8 / t1.Sub(t0).Seconds()
}

// run drives a phase: the stall watchdog, progress, and the deadline.
// worker runs one stream. abort ends when the phase fails or the caller
// cancels; load ends at the phase's deadline (and with abort).
type worker func(abort, load context.Context, id int) error

func (c *Config) run(ctx context.Context, m *meter, work worker) (start, end time.Time, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start = time.Now()
	m.lastMove = start
	m.tick(start)
	load, stopLoad := context.WithDeadline(ctx, start.Add(c.Duration))
	defer stopLoad()
	var wg sync.WaitGroup
	for i := range c.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := work(ctx, load, i); err != nil {
				cancel(err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-done:
			end = time.Now()
			m.tick(end)
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return start, end, cause
			}
			if err := ctx.Err(); err != nil {
				return start, end, err
			}
			return start, end, nil
		case now := <-t.C:
			last := m.tick(now)
			if now.Sub(last) > c.StallTimeout && load.Err() == nil {
				cancel(fmt.Errorf("no data moved for %v: %s stalled", c.StallTimeout, c.Endpoint.Name))
			}
			n++
			if c.Progress != nil && n%3 == 0 {
				c.Progress(now.Sub(start), m.total.Load(), m.rateBetween(now.Add(-time.Second), now))
			}
		}
	}
}

// Download saturates the download direction for cfg.Duration.
func Download(ctx context.Context, cfg Config) (Result, error) {
	cfg.defaults()
	m := &meter{}
	chunk := cfg.Endpoint.ChunkBytes
	if chunk <= 0 {
		chunk = MaxDownload
	}
	work := func(_, ctx context.Context, id int) error {
		buf := make([]byte, 64<<10)
		for ctx.Err() == nil {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Endpoint.Download(chunk), nil)
			if err != nil {
				return err
			}
			req.Header.Set("Accept-Encoding", "identity")
			resp, err := cfg.Client.Do(req)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("download from %s: %w", cfg.Endpoint.Name, unwrapURLError(err))
			}
			if resp.StatusCode != http.StatusOK {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
				resp.Body.Close()
				return fmt.Errorf("download from %s: server answered %s: %s", cfg.Endpoint.Name, resp.Status, strings.TrimSpace(string(msg)))
			}
			var got int64
			for {
				n, err := resp.Body.Read(buf)
				m.add(n)
				got += int64(n)
				if err == io.EOF {
					break
				}
				if err != nil {
					resp.Body.Close()
					if ctx.Err() != nil {
						return nil // the phase ended mid-body: normal
					}
					return fmt.Errorf("download from %s: connection failed after %d bytes: %w", cfg.Endpoint.Name, got, err)
				}
			}
			resp.Body.Close()
			if resp.ContentLength > 0 && got != resp.ContentLength {
				return fmt.Errorf("download from %s: %d of %d bytes", cfg.Endpoint.Name, got, resp.ContentLength)
			}
		}
		return nil
	}
	start, end, err := cfg.run(ctx, m, work)
	if err != nil {
		return Result{}, err
	}
	from := start.Add(cfg.Warmup)
	res := Result{Direction: "download", Bytes: m.total.Load(), Start: start, SteadyFrom: from, SteadyTo: end, Streams: cfg.Streams}
	res.BitsPerSecond = m.rateBetween(from, end)
	return res, nil
}

// uploadBody produces payload until its context ends, counting what the
// transport takes.
type uploadBody struct {
	ctx   context.Context
	m     *meter
	limit int64
	sent  int64
	off   int
}

func (b *uploadBody) Read(p []byte) (int, error) {
	if b.ctx.Err() != nil || b.sent >= b.limit {
		return 0, io.EOF
	}
	src := payload()
	n := copy(p, src[b.off:])
	n = int(min(int64(n), b.limit-b.sent))
	b.off = (b.off + n) % len(src)
	b.sent += int64(n)
	b.m.add(n)
	return n, nil
}

// drainTimeout bounds how long an upload may take to deliver what was
// queued when the phase ended.
const drainTimeout = 15 * time.Second

// Upload saturates the upload direction for cfg.Duration.
func Upload(ctx context.Context, cfg Config) (Result, error) {
	cfg.defaults()
	sent := &meter{}
	var mu sync.Mutex
	var reports []UploadReport
	completed := &meter{} // for endpoints without a timeline: bytes per finished request
	chunk := int64(1 << 20)
	work := func(abort, load context.Context, id int) error {
		size := chunk
		for load.Err() == nil {
			limit := int64(1 << 40)
			if !cfg.Endpoint.Timeline {
				limit = size
			}
			body := &uploadBody{ctx: load, m: sent, limit: limit}
			// The request outlives the load by up to drainTimeout, so the
			// data already queued still arrives and is reported.
			reqCtx, cancel := context.WithCancel(abort)
			stopDrain := context.AfterFunc(load, func() { time.AfterFunc(drainTimeout, cancel) })
			began := time.Now()
			err := func() error {
				req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, cfg.Endpoint.Upload, body)
				if err != nil {
					return err
				}
				req.Header.Set("Content-Type", "application/octet-stream")
				if !cfg.Endpoint.Timeline {
					req.ContentLength = limit
				}
				resp, err := cfg.Client.Do(req)
				if err != nil {
					return fmt.Errorf("upload to %s: %w", cfg.Endpoint.Name, unwrapURLError(err))
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
					return fmt.Errorf("upload to %s: server answered %s: %s", cfg.Endpoint.Name, resp.Status, strings.TrimSpace(string(msg)))
				}
				if !cfg.Endpoint.Timeline {
					io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
					completed.add(int(body.sent))
					if time.Since(began) < time.Second && size < 64<<20 {
						size *= 2
					}
					return nil
				}
				var rep UploadReport
				if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep); err != nil {
					return fmt.Errorf("upload to %s: reading the server's report: %w", cfg.Endpoint.Name, err)
				}
				if rep.Bytes != body.sent {
					return fmt.Errorf("upload to %s: server received %d of %d bytes", cfg.Endpoint.Name, rep.Bytes, body.sent)
				}
				mu.Lock()
				reports = append(reports, rep)
				mu.Unlock()
				return nil
			}()
			stopDrain()
			drainExpired := reqCtx.Err() != nil
			cancel()
			switch {
			case err == nil:
			case abort.Err() != nil:
				return nil // the phase already failed or was cancelled; that cause is reported
			case !cfg.Endpoint.Timeline && load.Err() != nil:
				return nil // a fixed-size request cut short by the deadline: not counted
			case drainExpired:
				return fmt.Errorf("upload to %s: the server did not take the last data within %v after the upload ended", cfg.Endpoint.Name, drainTimeout)
			default:
				return err
			}
		}
		return nil
	}
	// For timeline endpoints the meter watched for stalls counts bytes the
	// transport took; a stalled server stops that too, once the socket
	// buffer is full.
	var start, end time.Time
	var err error
	if cfg.Endpoint.Timeline {
		start, end, err = cfg.run(ctx, sent, work)
	} else {
		// Completion-timed: watch the sent bytes for stalls, count
		// completions for the rate.
		stop := make(chan struct{})
		ticked := make(chan struct{})
		go func() {
			defer close(ticked)
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case now := <-t.C:
					completed.tick(now)
				}
			}
		}()
		start, end, err = cfg.run(ctx, sent, work)
		close(stop)
		<-ticked
	}
	if err != nil {
		return Result{}, err
	}
	res := Result{Direction: "upload", Start: start, SteadyFrom: start.Add(cfg.Warmup), SteadyTo: start.Add(cfg.Duration), Streams: cfg.Streams}
	if cfg.Endpoint.Timeline {
		res.Bytes, res.BitsPerSecond = timelineRate(reports, cfg.Warmup)
	} else {
		completed.tick(time.Now())
		res.Bytes = completed.total.Load()
		res.BitsPerSecond = completed.rateBetween(res.SteadyFrom, end)
	}
	return res, nil
}

// timelineRate merges the servers' per-stream timelines on the server's
// clock and returns the total bytes and the rate after warmup, up to the
// last full bucket (the drain of queued data after the client stopped is
// still the bottleneck working at full rate).
func timelineRate(reps []UploadReport, warmup time.Duration) (total int64, bitsPerSecond float64) {
	var t0 int64 = -1
	for _, r := range reps {
		total += r.Bytes
		if r.Bytes > 0 && (t0 < 0 || r.StartUnixNs < t0) {
			t0 = r.StartUnixNs
		}
	}
	if t0 < 0 {
		return total, 0
	}
	bucket := int64(BucketSize)
	var merged []int64
	for _, r := range reps {
		if r.BucketNs != bucket {
			continue // not our resolution: ignore rather than misread
		}
		off := int((r.StartUnixNs - t0) / bucket)
		for i, b := range r.Buckets {
			for len(merged) <= off+i {
				merged = append(merged, 0)
			}
			merged[off+i] += b
		}
	}
	from := int(int64(warmup) / bucket)
	to := len(merged) - 1 // the last bucket is partial
	if to-from < 5 {
		return total, 0
	}
	var sum int64
	for _, b := range merged[from:to] {
		sum += b
	}
	return total, float64(sum) * 8 / (float64(to-from) * BucketSize.Seconds())
}
