// SPDX-License-Identifier: Apache-2.0

package reconcile_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

// fiftyLinks returns 50 autorate policies on en0…en49 and facts with all
// of them up, each on its own gateway.
func fiftyLinks(b testing.TB, download string) ([]config.Link, linkfacts.Facts) {
	b.Helper()
	var links []config.Link
	var facts linkfacts.Facts
	for i := range 50 {
		mac := net.HardwareAddr{0x02, 0, 0, 0, 0, byte(i)}
		p := configtest.Policy{Interface: fmt.Sprintf("en%d", i), GatewayMAC: mac.String(), Download: download, Upload: fmt.Sprintf("%dmbit", 5+i),
			More: "[autorate]\n" + `reflectors = ["1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4", "9.9.9.9", "2606:4700:4700::1111"]` + "\n"}
		links = append(links, configtest.Parse(b, fmt.Sprintf("link%02d", i), p.TOML()))
		facts.Interfaces = append(facts.Interfaces, linkfacts.InterfaceFacts{Name: fmt.Sprintf("en%d", i), Up: true, GatewayMAC: config.HardwareAddr(mac)})
	}
	return links, facts
}

// replay answers the read commands with what the emulator answered once,
// so the benchmark measures macake's planning (parsing, rendering,
// diffing), not the emulator.
type replay struct {
	answers map[string]execrun.Result
	calls   atomic.Int64
}

func (r *replay) Run(_ context.Context, cmd execrun.Command) (execrun.Result, error) {
	r.calls.Add(1)
	res, ok := r.answers[strings.Join(cmd.Argv, " ")]
	if !ok {
		return execrun.Result{}, fmt.Errorf("replay: no answer recorded for %q", cmd.Argv)
	}
	return res, nil
}

// shapedMac returns an emulated Mac with 50 links applied, plus other
// tools' pipes and anchor, and the state that goes with it.
func shapedMac(b *testing.B) (*pfdntest.Emulator, *state.State) {
	b.Helper()
	emu := pfdntest.New()
	withForeignState(b, emu)
	m := newMac(b, emu)
	links, facts := fiftyLinks(b, "100mbit")
	d, err := desired.Desired(links, facts, desired.Inputs{State: m.tokens.State}, desired.BackendFactsOf(m.backend.Info()))
	if err != nil {
		b.Fatal(err)
	}
	m.converge(d)
	return emu, m.tokens.State
}

// BenchmarkPlan50Links is one planning pass for 50 links against a full
// live state (100 owned pipes, 450 anchor rules, foreign objects):
// reconcile.Pass as a dry run runs it, whose plan parses the five reads and
// diffs. The
// reads are replayed from memory. "unchanged" finds nothing to do;
// "all-rates-changed" updates all 50 download pipes.
func BenchmarkPlan50Links(b *testing.B) {
	emu, st := shapedMac(b)
	rep := &replay{answers: map[string]execrun.Result{}}
	for _, c := range emu.Calls() {
		if !c.Mutating {
			rep.answers[strings.Join(c.Argv, " ")] = c.Result
		}
	}
	for _, tc := range []struct {
		name, download string
		wantOps        int
	}{{"unchanged", "100mbit", 0}, {"all-rates-changed", "120mbit", 50}} {
		b.Run(tc.name, func(b *testing.B) {
			links, facts := fiftyLinks(b, tc.download)
			backend, err := backend.Open(backend.Config{Runner: rep, Store: state.InMemory(st), GOOS: "darwin", Getenv: func(string) string { return "" }})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				out := reconcile.Pass(ctx, reconcile.PassInput{Run: reconcile.Run{Backend: backend}, Links: links, Facts: facts, Inputs: desired.Inputs{State: st}})
				if out.Err != nil {
					b.Fatal(out.Err)
				}
				p := out.Plan
				if len(p.Ops) != tc.wantOps {
					b.Fatalf("%d ops, want %d", len(p.Ops), tc.wantOps)
				}
			}
		})
	}
}

// BenchmarkApplyNoop is a whole `apply` pass on an already shaped Mac (50
// links) through the in-process emulator: reconcile.Pass as apply runs it,
// which finds nothing to apply. It reports the commands each pass runs (commands/op, all
// reads) and the mutating ones (mutating/op, which must be 0).
func BenchmarkApplyNoop(b *testing.B) {
	emu, st := shapedMac(b)
	links, facts := fiftyLinks(b, "100mbit")
	backend, err := backend.Open(backend.Config{Runner: emu, Store: state.InMemory(st), GOOS: "darwin", Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	emu.ResetCalls()
	b.ReportAllocs()
	tokens := &state.File{State: st}
	for b.Loop() {
		out := reconcile.Pass(ctx, reconcile.PassInput{Run: reconcile.Run{Backend: backend, Store: tokens, Do: reconcile.ApplyPlan, Verify: true},
			Links: links, Facts: facts, Inputs: desired.Inputs{State: st}})
		if out.Err != nil {
			b.Fatal(out.Err)
		}
	}
	b.StopTimer()
	calls := emu.Calls()
	b.ReportMetric(float64(len(calls))/float64(b.N), "commands/op")
	b.ReportMetric(float64(countMutating(calls))/float64(b.N), "mutating/op")
}

func countMutating(calls []pfdntest.Call) int {
	n := 0
	for _, c := range calls {
		if c.Mutating {
			n++
		}
	}
	return n
}
