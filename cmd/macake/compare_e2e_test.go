// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/measure"
)

// pipeWatchingServer is a speed-test server on loopback that notes, at
// each load's start, whether the emulator's two pipes existed; seen
// returns the sequence, repeats folded.
func pipeWatchingServer(t *testing.T, m *e2eMac) (url string, seen func() string) {
	t.Helper()
	var mu sync.Mutex
	var states []string
	h := speedtest.Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			mu.Lock()
			state := "unshaped"
			if len(m.pipes()) == 2 {
				state = "shaped"
			}
			if len(states) == 0 || states[len(states)-1] != state {
				states = append(states, state)
			}
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprint(states)
	}
}

// compareArgs is a brief bench --compare against url: one stream, short
// loads; this checks the switching, not the grades.
func compareArgs(url string) []string {
	return []string{"bench", "--compare", "--json", "--server", url, "--reflector", "127.0.0.1",
		"--idle", "1s", "--duration", "2s", "--streams", "1", "--settle", "0s"}
}

// mustCompare runs bench --compare against a server that sees the
// pipes: its three loads must see them unshaped, shaped, unshaped, and it
// must say how it switches the shaping (how).
func mustCompare(t *testing.T, m *e2eMac, how string) {
	t.Helper()
	url, seen := pipeWatchingServer(t, m)
	code, stdout, stderr := m.run(compareArgs(url)...)
	if code != exitcode.OK {
		t.Fatalf("bench --compare: exit %d\n%s\nwatch's log:\n%s", code, stderr, m.log())
	}
	var rep measure.CompareReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Runs) != 3 {
		t.Fatalf("bench --compare --json: %v\n%s", err, stdout)
	}
	if got := seen(); got != "[unshaped shaped unshaped]" {
		t.Errorf("the loads saw the pipes %s, want unshaped, shaped, unshaped", got)
	}
	if !strings.Contains(stderr, how) {
		t.Errorf("bench did not say how it switches (%q):\n%s", how, stderr)
	}
}

// TestBenchCompareWithWatchE2E: with `macake watch` running (on the
// emulated Mac), `macake bench --compare` pauses its shaping for the two
// unshaped runs and resumes it for the shaped one and at the end: the
// emulator's pipes are gone while bench loads the link unshaped and back
// when it loads it shaped, and stay in place afterwards. The load goes to
// a speed-test server on loopback, one stream, briefly: this checks the
// switching, not the grades (the e2e package grades a real bottleneck).
func TestBenchCompareWithWatchE2E(t *testing.T) {
	m := newE2EMac(t)
	m.write("home", configtest.Policy{Interface: "en0", Download: "50mbit", Upload: "10mbit", More: oneReflector}.TOML())
	m.startWatch()
	if len(m.pipes()) != 2 {
		t.Fatalf("pipes after start: %v", m.pipes())
	}

	mustCompare(t, m, "macake watch runs; it pauses its shaping for the unshaped runs")
	m.eventually("the shaping back after the compare", func() bool { return len(m.pipes()) == 2 })
	if st := m.status(); !st.Daemon.PausedUntil.IsZero() || len(st.Links) != 1 || st.Links[0].Controller == nil {
		t.Errorf("status after the compare: paused until %v, links %+v", st.Daemon.PausedUntil, st.Links)
	}
	for _, want := range []string{"shaping paused on request", "shaping resumed on request"} {
		if !strings.Contains(m.log(), want) {
			t.Errorf("watch's log lacks %q", want)
		}
	}
}

// TestBenchCompareWithoutWatchE2E: without watch, bench --compare takes
// the shaping down and applies it itself, and leaves it as it found it:
// applied before, applied after. (Not applied before, not after: the e2e
// package's TestBenchCompareOnThisKernel.)
func TestBenchCompareWithoutWatchE2E(t *testing.T) {
	m := newE2EMac(t)
	m.write("home", configtest.Policy{Interface: "en0", Mode: "fixed", Download: "50mbit", Upload: "10mbit"}.TOML())
	if code, _, stderr := m.run("apply"); code != exitcode.OK {
		t.Fatalf("apply: exit %d\n%s", code, stderr)
	}
	mustCompare(t, m, "macake down and apply take the shaping off and put it on")
	if got := len(m.pipes()); got != 2 {
		t.Errorf("applied before the compare, %d pipes after it", got)
	}
}
