// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// FuzzAnswer sends the daemon's side of the socket arbitrary request
// lines: it never panics, and whatever it answers is one Response in this
// format version carrying either the status or an error, never both.
// Measurements are refused here: the pipe has no peer credentials.
func FuzzAnswer(f *testing.F) {
	for _, req := range []string{
		`{"format_version":"` + FormatVersion + `","request":"status"}`,
		`{"format_version":"` + FormatVersion + `","request":"measurement","measurement":{"key":"wan|aa","profile":{"link":"wan"}}}`,
		`{"format_version":"99.0","request":"status"}`,
		`{"request":"status"}`,
		`{"format_version":"` + FormatVersion + `","request":"reboot"}`,
		`not json`, `{"format_version":1}`, `[]`, ``,
	} {
		f.Add([]byte(req))
	}
	h := Handler{Status: func(context.Context, Query) Status {
		return Status{FormatVersion: FormatVersion, Daemon: Daemon{Running: true, PID: 42}}
	}}
	f.Fuzz(func(t *testing.T, line []byte) {
		server, client := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- answer(context.Background(), server, h) }()
		go func() {
			client.Write(append(line, '\n'))
		}()
		client.SetDeadline(time.Now().Add(ioTimeout))
		out, _ := io.ReadAll(client)
		client.Close()
		<-done
		if len(out) == 0 {
			// Only a request line too long to read goes unanswered.
			if i := bytes.IndexByte(line, '\n'); i >= 0 && i < 4096 || i < 0 && len(line) < 4096 {
				t.Fatalf("no answer to %q", line)
			}
			return
		}
		var resp Response
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&resp); err != nil {
			t.Fatalf("answer %q is not a Response: %v", out, err)
		}
		if resp.FormatVersion != FormatVersion || (resp.Status == nil) == (resp.Error == "") {
			t.Fatalf("answer %+v: want this format version and exactly one of status and error", resp)
		}
	})
}

// FuzzExchange is the client's side: whatever a process listening on the
// socket answers, Fetch returns a status or an error and never panics or
// hangs past its timeout; a status comes only from a well-formed answer.
func FuzzExchange(f *testing.F) {
	good, _ := json.Marshal(Response{FormatVersion: FormatVersion, Status: &Status{FormatVersion: FormatVersion, Daemon: Daemon{Running: true, PID: 7}}})
	f.Add(good)
	f.Add([]byte(`{"format_version":"` + FormatVersion + `","error":"busy"}`))
	f.Add([]byte(`{"format_version":"2.0","status":{}}`))
	f.Add([]byte(`{"format_version":"` + FormatVersion + `"}`))
	f.Add([]byte(`{"format_version":"` + FormatVersion + `","status":{"running":"yes"}}`))
	f.Add([]byte("\x00\xff"))
	f.Add([]byte(""))
	path := filepath.Join(f.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	answers := make(chan []byte)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a := <-answers
			c.SetDeadline(time.Now().Add(ioTimeout))
			// Read the request line, then answer and hang up.
			buf := make([]byte, 4096)
			c.Read(buf)
			c.Write(a)
			c.Close()
		}
	}()
	f.Fuzz(func(t *testing.T, answer []byte) {
		go func() { answers <- answer }()
		st, err := Fetch(context.Background(), path)
		if err != nil {
			if errors.Is(err, ErrNotRunning) {
				t.Fatalf("a daemon that answered is reported as not running: %v", err)
			}
			return
		}
		// The client reads the first JSON value of the answer.
		var first Response
		if err := json.NewDecoder(bytes.NewReader(answer)).Decode(&first); err != nil || first.Status == nil || first.Error != "" {
			t.Fatalf("status %+v from an answer that is no status: %q (%v)", st, answer, err)
		}
	})
}
