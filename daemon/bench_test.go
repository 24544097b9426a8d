// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/state"
)

// benchDaemon is a daemon on the in-process emulator with one shaped
// fixed link, set up by one pass, driven by calling pass directly (as the
// owner goroutine would).
func benchDaemon(b *testing.B) (*Daemon, *pfdntest.Emulator) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "links.d")
	configtest.Write(b, dir, "cable", configtest.Policy{Interface: "en0", Mode: "fixed", Download: "50mbit", Upload: "5mbit"}.TOML())
	stateDir := b.TempDir()
	tokens := &state.File{Dir: stateDir, State: &state.State{}}
	emu := pfdntest.New()
	backend, err := backend.Open(backend.Config{Store: tokens, Runner: emu, GOOS: "darwin", Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	d, err := New(Config{
		ConfigDir: dir, StateDir: stateDir, LoadOptions: config.LoadOptions{SkipOwnershipCheck: true},
		Backend: backend, Tokens: tokens, Facts: make(fakeFacts), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MTU: func([]string) map[string]int { return nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	d.retry = time.NewTimer(time.Hour)
	d.runCtx = context.Background()
	d.net.facts, d.net.have = factsOn("en0", ""), true
	d.pass(context.Background(), "start")
	if !d.rec.liveOK {
		b.Fatal("the first pass did not apply")
	}
	return d, emu
}

// BenchmarkWatchDriftPass is one drift check that finds nothing to
// change: re-read the policy directory, match, work out the desired
// state, observe pf/dummynet (five read-only commands, here answered by
// the in-process emulator instead of forked pfctl and dnctl) and plan.
func BenchmarkWatchDriftPass(b *testing.B) {
	d, emu := benchDaemon(b)
	ctx := context.Background()
	emu.ResetCalls()
	b.ReportAllocs()
	for b.Loop() {
		d.pass(ctx, "drift")
	}
	b.StopTimer()
	if n := len(emu.MutatingCalls()); n != 0 {
		b.Fatalf("a drift check that finds nothing changed something (%d commands)", n)
	}
	b.ReportMetric(float64(len(emu.Calls()))/float64(b.N), "commands/op")
}
