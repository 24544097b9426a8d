// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/daemon/operator"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/golden"
)

// TestPauseOutput: what pause and resume print when watch answers
// (testdata/pause, which docs/OPERATIONS.md shows), and what they ask it.
func TestPauseOutput(t *testing.T) {
	old := time.Local
	time.Local = time.UTC // the golden files' clock
	t.Cleanup(func() { time.Local = old })
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	ln, err := statusapi.Listen(statusapi.SocketPath(r.stateDir), operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan statusapi.PauseChange, 4)
	go statusapi.Serve(t.Context(), ln, statusapi.Handler{Pause: func(_ context.Context, c statusapi.PauseChange) (*statusapi.Pause, error) {
		got <- c
		if c.For == 0 {
			return nil, nil
		}
		since := time.Date(2026, 12, 1, 14, 4, 5, 0, time.UTC)
		return &statusapi.Pause{Link: c.Link, Since: since, Until: since.Add(c.For), RemainingSeconds: c.For.Seconds(), By: c.By}, nil
	}}, slog.New(slog.NewTextHandler(io.Discard, nil)))

	stdout, _ := r.mustRun(exitcode.OK, "pause", "--for", "1h", "home")
	golden.Check(t, filepath.Join("testdata", "pause", "pause.txt"), []byte(stdout), docsShowIt)
	if c := <-got; c != (statusapi.PauseChange{Link: "home", For: time.Hour, By: "root"}) {
		t.Errorf("pause asked for %+v", c)
	}
	stdout, _ = r.mustRun(exitcode.OK, "resume", "home")
	golden.Check(t, filepath.Join("testdata", "pause", "resume.txt"), []byte(stdout), docsShowIt)
	if c := <-got; c != (statusapi.PauseChange{Link: "home", By: "root"}) {
		t.Errorf("resume asked for %+v", c)
	}
	if stdout, _ := r.mustRun(exitcode.OK, "pause"); stdout != "Paused macake's shaping of every link until 14:34:05 (30m0s); it comes back by itself then, or with 'macake resume'.\n" {
		t.Errorf("pause without a link or --for: %q", stdout)
	}
	if c := <-got; c.Link != "" || c.For != defaultPause {
		t.Errorf("pause without a link or --for asked for %+v", c)
	}
	if _, stderr := r.mustRun(exitcode.Usage, "pause", "home", "hotel"); stderr != "macake pause: one link at a time, or none for every link (got 2)\n" {
		t.Errorf("two links: %q", stderr)
	}
	if _, stderr := r.mustRun(exitcode.Usage, "pause", "--for", "0s"); stderr != "macake pause: --for 0s: give a length above 0 and at most 24h0m0s; 'macake resume' puts the shaping back\n" {
		t.Errorf("--for 0s: %q", stderr)
	}
}
