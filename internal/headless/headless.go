// SPDX-License-Identifier: Apache-2.0

// Package headless drives a real headless Chromium for tests, over the
// DevTools protocol on a loopback port: open a page, evaluate JavaScript
// in it, collect its console errors and uncaught exceptions, take a
// screenshot. Chromium runs through execrun with a fresh profile and every
// flag that keeps it from talking to anything but the page under test.
// Tests call Start, which skips when no Chromium is installed (Debian:
// apt-get install chromium).
package headless

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/macake/macake/execrun"
)

// Programs are the names Chromium is installed under, in the order they
// are looked for.
var Programs = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Find returns the path of the first of Programs on PATH, or "".
func Find() string {
	for _, name := range Programs {
		for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	return ""
}

// flags keep Chromium headless, sandbox-free (tests run as root), and
// quiet: no first-run, sync, update, QUIC or background traffic.
var flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-crash-reporter", "--disable-extensions", "--disable-default-apps",
	"--hide-scrollbars", "--mute-audio", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
	// The DevTools socket takes only the origin this package sends
	// (x/net/websocket always sends one).
	"--remote-allow-origins=" + origin,
}

const origin = "http://127.0.0.1"

// Browser is one running Chromium.
type Browser struct {
	tb     testing.TB
	conn   *websocket.Conn
	cancel context.CancelFunc
	exited chan struct{}
	// profile is the fresh --user-data-dir, removed by close.
	profile string
	output  *execrun.Result

	nextID  atomic.Int64
	mu      sync.Mutex
	pending map[int64]chan message
	// listeners get every event of their session.
	listeners map[string]func(message)
}

// message is a DevTools protocol message: a reply (ID) or an event
// (Method).
type message struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Start starts Chromium with a fresh profile, or skips tb (saying why)
// when none is installed. It is stopped in tb's Cleanup.
func Start(tb testing.TB) *Browser {
	tb.Helper()
	bin := Find()
	if bin == "" {
		tb.Skipf("skipping the browser test: no Chromium on PATH (looked for %s; Debian: apt-get install chromium chromium-driver)", strings.Join(Programs, ", "))
	}
	// Not tb.TempDir: Chromium's helper processes can still be writing
	// to the profile when the browser process is gone, and TempDir fails
	// the test if the first removal does; close removes it with retries.
	profile, err := os.MkdirTemp("", "macake-chromium-")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Browser{tb: tb, cancel: cancel, profile: profile, exited: make(chan struct{}), pending: map[int64]chan message{}, listeners: map[string]func(message){}}
	argv := append(append([]string{bin}, flags...), "--user-data-dir="+profile, "about:blank")
	go func() {
		defer close(b.exited)
		res, _ := execrun.Exec{Timeout: 30 * time.Minute}.Run(ctx, execrun.Command{Argv: argv})
		b.output = &res
	}()
	tb.Cleanup(b.close)

	// Chromium writes the port and the browser's path to DevToolsActivePort
	// once it listens.
	var port, path string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if data, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort")); err == nil {
			if lines := strings.Fields(string(data)); len(lines) == 2 {
				port, path = lines[0], lines[1]
				break
			}
		}
		select {
		case <-b.exited:
			tb.Fatalf("chromium exited at start:\n%s", b.output.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("chromium did not open its DevTools port within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	conn, err := websocket.Dial("ws://127.0.0.1:"+port+path, "", origin)
	if err != nil {
		tb.Fatalf("connecting to chromium's DevTools: %v", err)
	}
	b.conn = conn
	go b.read()
	return b
}

// close asks Chromium to quit (so that it stops its helper processes
// itself), kills it if it has not within 5 s, and removes its profile.
func (b *Browser) close() {
	if b.conn != nil {
		go b.call("", "Browser.close", nil, nil)
		select {
		case <-b.exited:
		case <-time.After(5 * time.Second):
		}
		b.conn.Close()
	}
	b.cancel()
	<-b.exited
	var err error
	for range 20 {
		if err = os.RemoveAll(b.profile); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.tb.Logf("leaving chromium's profile %s behind: %v", b.profile, err)
}

// read dispatches replies to their callers and events to their session.
func (b *Browser) read() {
	for {
		var m message
		if err := websocket.JSON.Receive(b.conn, &m); err != nil {
			b.mu.Lock()
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else if f := b.listeners[m.SessionID]; f != nil {
			f(m)
		}
		b.mu.Unlock()
	}
}

// call sends one command and decodes its result into out (nil: ignore).
func (b *Browser) call(session, method string, params, out any) error {
	id := b.nextID.Add(1)
	ch := make(chan message, 1)
	b.mu.Lock()
	b.pending[id] = ch
	b.mu.Unlock()
	req := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		req["sessionId"] = session
	}
	if params == nil {
		req["params"] = map[string]any{}
	}
	if err := websocket.JSON.Send(b.conn, req); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		switch {
		case !ok:
			return fmt.Errorf("%s: chromium closed the connection", method)
		case m.Error != nil:
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		case out != nil:
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: no answer in 30 s", method)
	}
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string
	mu      sync.Mutex
	loaded  chan struct{}
	// problems are console errors, uncaught exceptions and failed loads.
	problems []string
}

// Open opens a tab of width×height CSS pixels, navigates it to url and
// waits for its load event.
func (b *Browser) Open(url string, width, height int) *Page {
	b.tb.Helper()
	var target struct{ TargetID string }
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		b.tb.Fatal(err)
	}
	var attached struct{ SessionID string }
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		b.tb.Fatal(err)
	}
	p := &Page{b: b, session: attached.SessionID, loaded: make(chan struct{}, 1)}
	b.mu.Lock()
	b.listeners[p.session] = p.event
	b.mu.Unlock()
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
		if err := b.call(p.session, m, nil, nil); err != nil {
			b.tb.Fatal(err)
		}
	}
	if err := b.call(p.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		b.tb.Fatal(err)
	}
	var nav struct{ ErrorText string }
	if err := b.call(p.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil || nav.ErrorText != "" {
		b.tb.Fatalf("opening %s: %v %s", url, err, nav.ErrorText)
	}
	select {
	case <-p.loaded:
	case <-time.After(30 * time.Second):
		b.tb.Fatalf("%s did not load within 30 s", url)
	}
	return p
}

// event records what a page reports that a test must not ignore.
func (p *Page) event(m message) {
	var problem string
	switch m.Method {
	case "Page.loadEventFired":
		select {
		case p.loaded <- struct{}{}:
		default:
		}
	case "Runtime.consoleAPICalled":
		var e struct {
			Type string
			Args []struct {
				Value       any
				Description string
			}
		}
		json.Unmarshal(m.Params, &e)
		if e.Type == "error" || e.Type == "assert" {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, fmt.Sprint(a.Value, a.Description))
			}
			problem = "console." + e.Type + ": " + strings.Join(parts, " ")
		}
	case "Runtime.exceptionThrown":
		var e struct {
			ExceptionDetails struct {
				Text      string
				Exception struct{ Description string }
			}
		}
		json.Unmarshal(m.Params, &e)
		problem = "uncaught: " + e.ExceptionDetails.Text + " " + e.ExceptionDetails.Exception.Description
	case "Log.entryAdded":
		var e struct {
			Entry struct{ Level, Source, Text, URL string }
		}
		json.Unmarshal(m.Params, &e)
		if e.Entry.Level == "error" {
			problem = fmt.Sprintf("%s error: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
		}
	}
	if problem != "" {
		p.mu.Lock()
		p.problems = append(p.problems, problem)
		p.mu.Unlock()
	}
}

// Problems returns the console errors, uncaught exceptions and failed
// loads (CSP violations among them) the page reported so far.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value, which must be JSON, into out.
func (p *Page) Eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage
		}
		ExceptionDetails *struct {
			Text      string
			Exception struct{ Description string }
		}
	}
	if err := p.b.call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("evaluating %s: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out == nil {
		return nil
	}
	if len(r.Result.Value) == 0 {
		return errors.New("evaluating " + expr + ": no value")
	}
	return json.Unmarshal(r.Result.Value, out)
}

// WaitFor polls the JavaScript condition cond every 20 ms until it is
// true or timeout passes, and returns how long it took.
func (p *Page) WaitFor(cond string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		var ok bool
		if err := p.Eval("Boolean("+cond+")", &ok); err != nil {
			return time.Since(start), err
		}
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("%s still false after %v", cond, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Click clicks the middle of the first element that matches the CSS
// selector as a person would: the mouse moves there, presses and
// releases (Input.dispatchMouseEvent), so the page gets real trusted
// events, not a script's click().
func (p *Page) Click(selector string) error {
	var box struct{ X, Y float64 }
	sel, _ := json.Marshal(selector)
	expr := `(() => { const e = document.querySelector(` + string(sel) + `); if (!e) return null; e.scrollIntoView({block: "center"});` +
		` const r = e.getBoundingClientRect(); return {X: r.left + r.width / 2, Y: r.top + r.height / 2}; })()`
	var found json.RawMessage
	if err := p.Eval(expr, &found); err != nil {
		return err
	}
	if string(found) == "null" {
		return fmt.Errorf("clicking %s: no such element", selector)
	}
	if err := json.Unmarshal(found, &box); err != nil {
		return err
	}
	for _, kind := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		ev := map[string]any{"type": kind, "x": box.X, "y": box.Y}
		if kind != "mouseMoved" {
			ev["button"], ev["clickCount"] = "left", 1
		}
		if err := p.b.call(p.session, "Input.dispatchMouseEvent", ev, nil); err != nil {
			return fmt.Errorf("clicking %s: %w", selector, err)
		}
	}
	return nil
}

// Screenshot returns a PNG of the whole page.
func (p *Page) Screenshot() ([]byte, error) {
	var r struct{ Data string }
	if err := p.b.call(p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}
