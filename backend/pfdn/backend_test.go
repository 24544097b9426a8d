// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

func TestSetRateIsOneCommand(t *testing.T) {
	ctx := context.Background()
	h := shapedWanLTE(t)
	h.e.ResetCalls()
	lte, _ := wanLTE.Link("lte")
	if err := h.b.SetRate(ctx, lte, shape.Download, shape.Pipe{RateBits: 33_300_000, QueueBytes: 100_000}); err != nil {
		t.Fatal(err)
	}
	calls := h.e.Calls()
	if len(calls) != 1 || strings.Join(calls[0].Argv, " ") != "/usr/sbin/dnctl pipe 48004 config bw 33300Kbit/s queue 98Kbytes" {
		t.Fatalf("calls: %+v", calls)
	}
	live, _ := h.b.Observe(ctx)
	if p, _ := live.Dummynet.Pipe(48004); p.Config.BandwidthBits != 33_300_000 || p.Config.QueueBytes != 98*1024 {
		t.Errorf("pipe 48004 after SetRate: %+v", p.Config)
	}
	// A rate the desired state then carries is no change at all.
	lte.Download = shape.Pipe{RateBits: 33_300_000, QueueBytes: 100_000}
	if p, err := h.b.Plan(ctx, state(wanLTE.Links[0], lte)); err != nil || !p.Empty() {
		t.Errorf("plan after SetRate with the same rate:\n%s %v", listing(p), err)
	}
	h.e.AddFault(pfdntest.Fault{Match: "pipe 48004", Kind: pfdntest.Fail, ExitCode: 65, Stderr: "dnctl: bandwidth too large\n"})
	err := h.b.SetRate(ctx, lte, shape.Download, shape.Pipe{RateBits: 1e6, QueueBytes: 1e4})
	var ee *execrun.Error
	if !errors.As(err, &ee) || ee.ExitCode != 65 || !strings.Contains(err.Error(), `pipe 48004 "lte/download"`) || !strings.Contains(err.Error(), "bandwidth too large") {
		t.Errorf("SetRate failure: %v", err)
	}
	bad := lte
	bad.Slot = 10_000
	if err := h.b.SetRate(ctx, bad, shape.Upload, lte.Upload); err == nil {
		t.Error("a slot outside the range must fail")
	}
}

func TestExecuteTreatsAlreadyGoneAsDone(t *testing.T) {
	ctx := context.Background()
	h := shapedWanLTE(t)
	p, err := h.b.Plan(ctx, shape.State{})
	if err != nil {
		t.Fatal(err)
	}
	// Between plan and execute, another tool deletes a pipe and runs
	// pfctl -d (macake's token dies).
	h.e.DeletePipe(48003)
	h.e.DisablePF()
	for _, op := range p.Ops {
		if err := h.b.Execute(ctx, op); err != nil {
			t.Fatalf("%s: %v", op.Label, err)
		}
	}
	if h.tokens.PFToken() != "" {
		t.Error("a stale token must be forgotten once pf said so")
	}
	calls := h.e.Calls()
	last := calls[len(calls)-1]
	if last.Result.ExitCode != 1 || !strings.Contains(string(last.Result.Stderr), "pfctl: pf not enabled") {
		t.Errorf("the -X really answered 'not enabled': %+v", last)
	}
}

func TestExecuteFailsOnRealErrors(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	p, _ := h.b.Plan(ctx, wanLTE)
	h.e.AddFault(pfdntest.Fault{Match: "pipe 48001", Kind: pfdntest.Fail, Stderr: "dnctl: setsockopt(IP_DUMMYNET_CONFIGURE): No space left on device\n"})
	err := h.b.Execute(ctx, opByID(t, p, "48001"))
	if err == nil || !strings.Contains(err.Error(), `pipe 48001 "wan/upload": running "/usr/sbin/dnctl pipe 48001 config bw 20000Kbit/s queue 64Kbytes": exit status 1: dnctl: setsockopt(IP_DUMMYNET_CONFIGURE): No space left on device`) {
		t.Errorf("got %v", err)
	}
	// A pipe delete failing for another reason than "missing" is an error.
	h.e.ClearFaults()
	h.converge(ctx, wanLTE)
	tp, _ := h.b.Plan(ctx, shape.State{})
	h.e.AddFault(pfdntest.Fault{Match: "pipe delete", Kind: pfdntest.Fail, Stderr: "dnctl: rule 48001: setsockopt(IP_DUMMYNET_DEL): Device busy\n"})
	if err := h.b.Execute(ctx, opByID(t, tp, "48001")); err == nil {
		t.Error("a busy pipe delete must fail")
	}
}

type failingStore struct{}

func (failingStore) PFToken() string         { return "" }
func (failingStore) SetPFToken(string) error { return errors.New("disk full") }

func (failingStore) EnableIntent() (pfdn.EnableIntent, bool)  { return pfdn.EnableIntent{}, false }
func (failingStore) SetEnableIntent(*pfdn.EnableIntent) error { return nil }

func TestTokenThatCannotBeSavedIsGivenBack(t *testing.T) {
	ctx := context.Background()
	e := pfdntest.New()
	b, err := pfdn.New(e, failingStore{}, pfdn.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := b.Plan(ctx, wanLTE)
	var last error
	for _, op := range p.Ops {
		last = b.Execute(ctx, op)
	}
	if last == nil || !strings.Contains(last.Error(), "released again") || !strings.Contains(last.Error(), "disk full") {
		t.Fatalf("got %v", last)
	}
	if s := e.Snapshot(); s.PFEnabled || len(s.References) != 0 {
		t.Errorf("the reference leaked: %+v", s)
	}
}

func TestPlanWithoutTheHookFailsButShowsThePlan(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.e.DropHook()
	p, err := h.b.Plan(ctx, wanLTE)
	hm, blocked := backend.Blocked(err)
	if !blocked || hm.Kind != "hook_missing" || !strings.Contains(hm.Fix, "add the line dummynet-anchor \"com.apple/*\" to /etc/pf.conf") {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "/etc/pf.conf") || p.Empty() {
		t.Errorf("error %q, plan:\n%s", err, listing(p))
	}
	// Tearing down needs no hook.
	if _, err := h.b.Teardown(ctx); err != nil {
		t.Errorf("teardown without the hook: %v", err)
	}
}

func TestUnavailableTools(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		setup func(e *pfdntest.Emulator)
	}{
		{"not root", func(e *pfdntest.Emulator) { e.SetPrivileged(false) }},
		{"not installed", func(e *pfdntest.Emulator) { e.SetToolsMissing(true) }},
		{"dnctl not root", func(e *pfdntest.Emulator) {
			e.AddFault(pfdntest.Fault{Match: "^dnctl", Kind: pfdntest.Fail, ExitCode: 69, Stderr: "dnctl: socket: Operation not permitted\n"})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			c.setup(h.e)
			if _, err := h.b.Plan(ctx, wanLTE); !errors.Is(err, pfdn.ErrUnavailable) {
				t.Errorf("got %v, want ErrUnavailable", err)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := pfdn.New(nil, &pfdn.MemoryTokens{}, pfdn.DefaultOptions()); err == nil {
		t.Error("nil runner accepted")
	}
	o := pfdn.DefaultOptions()
	o.Anchor = ""
	if _, err := pfdn.New(pfdntest.New(), &pfdn.MemoryTokens{}, o); err == nil {
		t.Error("empty anchor accepted")
	}
}

func TestCustomAnchorAndRange(t *testing.T) {
	ctx := context.Background()
	e := pfdntest.New()
	o := pfdn.DefaultOptions()
	o.Anchor, o.Pipes = "com.apple/shaper", pfdn.PipeRange{First: 1000, Last: 1009}
	tokens := &pfdn.MemoryTokens{}
	b, err := pfdn.New(e, tokens, o)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, e: e, b: b, tokens: tokens, known: map[string]int{}}
	s := state(link("wan", "en0", 4, 1, 2, 4096))
	h.converge(ctx, s)
	h.checkShaped(s)
	snap := e.Snapshot()
	if _, ok := snap.Rulesets["com.apple/shaper"]; !ok || snap.Pipes[1008] == "" || snap.Pipes[1009] == "" {
		t.Errorf("custom anchor and range not used:\n%s", snap)
	}
	if _, err := h.b.Plan(ctx, state(link("wan", "en0", 5, 1, 2, 4096))); err == nil {
		t.Error("slot 5 does not fit 1000-1009")
	}
}

func TestPlanJSONKeysAreInBaseUnits(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	p, _ := h.b.Plan(ctx, wanLTE)
	op := opByID(t, p, "48001")
	f := op.Fields
	if f[0].Key != "bandwidth_bits_per_second" || f[0].AfterValue != int64(20_000_000) || f[1].Key != "queue_bytes" || f[1].AfterValue != int64(64<<10) {
		t.Errorf("fields: %+v", f)
	}
	if op.Label != `pipe 48001 "wan/upload"` || op.Kind != pfdn.KindPipe || op.Link != "wan" || op.Interface != "en0" {
		t.Errorf("op: %+v", op)
	}
}

func opByID(t *testing.T, p plan.Plan, id string) plan.Op {
	t.Helper()
	for _, op := range p.Ops {
		if op.ID == id {
			return op
		}
	}
	t.Fatalf("no op %s in\n%s", id, listing(p))
	return plan.Op{}
}
