// SPDX-License-Identifier: Apache-2.0

// Package speedtest saturates a link with parallel HTTP streams and
// measures what it carried, for `macake measure` and `macake bench`.
//
// It speaks a tiny protocol that [Handler] serves (run it with `macake
// measure --serve ADDR` on a machine behind the link you want to test):
//
//	GET  /                   200 "macake speedtest", to check reachability
//	GET  /download?bytes=N   200 with N incompressible bytes (N ≤ 10 GiB)
//	POST /upload             reads the body to its end, then 200 with JSON:
//	    {"bytes":N,"start_unix_ns":T,"bucket_ns":100000000,"buckets":[b0,b1,...]}
//	    bytes received per 100 ms, on a 100 ms grid of the server's clock
//
// The upload timeline lets the client measure the rate at which data
// actually arrived, free of the sender's socket buffer (which accepts
// megabytes the link has not carried yet). Other servers work too: any
// URL that serves N bytes for download and accepts a POST for upload (the
// default public endpoint is Cloudflare's speed test); uploads are then
// timed by request completion.
package speedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// MaxDownload bounds one download request.
const MaxDownload = 10 << 30

// BucketSize is the resolution of the upload timeline.
const BucketSize = 100 * time.Millisecond

// UploadReport is the JSON answer to POST /upload.
type UploadReport struct {
	Bytes       int64   `json:"bytes"`
	StartUnixNs int64   `json:"start_unix_ns"`
	BucketNs    int64   `json:"bucket_ns"`
	Buckets     []int64 `json:"buckets"`
}

// payload is 1 MiB of pseudo-random bytes, written over and over: not
// compressible by anything on the path, and cheap to produce.
var payload = sync.OnceValue(func() []byte {
	b := make([]byte, 1<<20)
	r := rand.NewChaCha8([32]byte{'m', 'a', 'c', 'a', 'k', 'e'})
	r.Read(b)
	return b
})

// ListenConfig returns a ListenConfig for the server: its connections ask
// for CUBIC where the OS lets a socket choose, like the client's.
func ListenConfig() *net.ListenConfig { return &net.ListenConfig{Control: loadSocketControl} }

// Handler returns the server side of the protocol.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "macake speedtest\n")
	})
	mux.HandleFunc("GET /download", serveDownload)
	mux.HandleFunc("POST /upload", serveUpload)
	return mux
}

func serveDownload(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
	if err != nil || n < 0 || n > MaxDownload {
		http.Error(w, fmt.Sprintf("bytes must be an integer from 0 to %d", int64(MaxDownload)), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.Header().Set("Cache-Control", "no-store")
	p := payload()
	for n > 0 {
		k := min(n, int64(len(p)))
		if _, err := w.Write(p[:k]); err != nil {
			return // the client went away: the normal end of a timed download
		}
		n -= k
	}
}

func serveUpload(w http.ResponseWriter, r *http.Request) {
	rep := UploadReport{BucketNs: int64(BucketSize)}
	// A chunked body's reader returns only when the buffer is full (it
	// waits for the rest of any chunk whose header it has seen), so the
	// buffer size is the grain of the timeline. 4 KiB keeps the error at
	// the edge of the client's measuring window to a few KiB per stream.
	buf := make([]byte, 4<<10)
	var start time.Time
	var skew time.Duration // first byte's offset into its bucket
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			now := time.Now()
			if start.IsZero() {
				// Buckets sit on a grid of the server's wall clock, so
				// the timelines of parallel streams add up exactly.
				start = now
				skew = time.Duration(now.UnixNano() % int64(BucketSize))
				rep.StartUnixNs = now.UnixNano() - int64(skew)
			}
			i := int((skew + now.Sub(start)) / BucketSize)
			for len(rep.Buckets) <= i {
				rep.Buckets = append(rep.Buckets, 0)
			}
			rep.Buckets[i] += int64(n)
			rep.Bytes += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			http.Error(w, "reading upload: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(rep)
}

// Serve serves the speed test on ln until ctx ends, then lets the
// transfers in progress finish for a moment and closes.
func Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// URLs are what to pass to --server for a server listening on addr: its
// own address, or, for a listen address that takes every address (":8080"
// listens on [::]:8080, which no client can dial), one for each of local,
// the machine's addresses, loopback and link-local ones left out unless
// there is nothing else.
func URLs(addr net.Addr, local []net.Addr) []string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || ta.IP != nil && !ta.IP.IsUnspecified() {
		return []string{"http://" + addr.String()}
	}
	port := strconv.Itoa(ta.Port)
	var urls, loopback []string
	for _, a := range local {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() || ipn.IP.IsMulticast() {
			continue
		}
		u := "http://" + net.JoinHostPort(ipn.IP.String(), port)
		if ipn.IP.IsLoopback() {
			loopback = append(loopback, u)
			continue
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		urls = loopback
	}
	if len(urls) == 0 {
		urls = []string{"http://HOST:" + port}
	}
	return urls
}
