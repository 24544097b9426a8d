// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// The desired states the convergence tests move between.
var (
	wanLTE = state(
		link("wan", "en0", 0, 20, 250, 64<<10, cloudflare, cloudflare6),
		link("lte", "en5", 1, 5, 40, 32<<10, google),
	)
	previousConfig = state(
		link("wan", "en0", 0, 10, 480, 128<<10, google),
		link("hotspot", "en7", 2, 1.234567, 30.5, 10_000),
	)
)

// startState is a Mac as macake may find it. foreign runs before macake
// ever ran, macake is what an earlier macake run left behind, after is
// what other tools did since. Replaying foreign and after on a fresh Mac
// gives the state teardown must return to.
type startState struct {
	name    string
	foreign func(ctx context.Context, t *testing.T, e *pfdntest.Emulator)
	macake  func(ctx context.Context, t *testing.T, h *harness)
	after   func(ctx context.Context, t *testing.T, e *pfdntest.Emulator)
}

func foreignRun(ctx context.Context, t *testing.T, e *pfdntest.Emulator, stdin string, argv ...string) {
	t.Helper()
	if res, err := e.Foreign(ctx, stdin, argv...); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v: %v %s", argv, err, res.Stderr)
	}
}

var startStates = []startState{
	{name: "empty"},
	{name: "stock-mac", foreign: func(ctx context.Context, t *testing.T, e *pfdntest.Emulator) {
		// A service holds pf enabled and something already used dnctl.
		e.TakeReference(300, "socketfilterfw")
		foreignRun(ctx, t, e, "", "/usr/sbin/dnctl", "list")
	}},
	{name: "previous-config", macake: func(ctx context.Context, t *testing.T, h *harness) {
		h.converge(ctx, previousConfig)
	}},
	{name: "half-applied", macake: func(ctx context.Context, t *testing.T, h *harness) {
		// A crash after the pipes were made, before the anchor was loaded
		// (the slots were saved first).
		h.record(wanLTE)
		p, err := h.b.Plan(ctx, wanLTE)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range p.Ops[:2] {
			if err := h.b.Execute(ctx, op); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{name: "foreign-pipes-and-anchors", foreign: func(ctx context.Context, t *testing.T, e *pfdntest.Emulator) {
		foreignRun(ctx, t, e, "", "/usr/sbin/dnctl", "pipe", "40269", "config", "bw", "1Mbit/s", "delay", "500", "plr", "0.1")
		foreignRun(ctx, t, e, "", "/usr/sbin/dnctl", "pipe", "40270", "config", "bw", "1Mbit/s", "delay", "500")
		foreignRun(ctx, t, e, "", "/usr/sbin/dnctl", "queue", "7", "config", "pipe", "40269", "weight", "5")
		foreignRun(ctx, t, e, "", "/usr/sbin/dnctl", "pipe", "48997", "config", "bw", "10Mbit/s", "delay", "100")
		// In macake's range with macake's kind of settings but in no state
		// file and no rule of macake's: another tool's, never touched.
		foreignRun(ctx, t, e, "", "/usr/sbin/dnctl", "pipe", "48101", "config", "bw", "1Mbit/s", "queue", "10Kbytes")
		foreignRun(ctx, t, e, "", "/usr/sbin/dnctl", "pipe", "48500", "config", "bw", "2Mbit/s")
		foreignRun(ctx, t, e, "no dummynet quick on lo0 all\ndummynet in quick inet all allow-opts pipe 40269\n", "/sbin/pfctl", "-a", "com.apple.nlc/base", "-f", "-")
		// Sorted after "macake", its rules would override macake's on en9
		// (pf: the last match wins); the random states never use en9.
		foreignRun(ctx, t, e, "dummynet out on en9 all pipe 40270\n", "/sbin/pfctl", "-a", "com.apple/other", "-f", "-")
		e.TakeReference(400, "nlcd")
	}},
	{name: "pf-disabled", foreign: func(ctx context.Context, t *testing.T, e *pfdntest.Emulator) {
		e.TakeReference(300, "socketfilterfw")
	}, macake: func(ctx context.Context, t *testing.T, h *harness) {
		h.converge(ctx, previousConfig)
	}, after: func(ctx context.Context, t *testing.T, e *pfdntest.Emulator) {
		e.DisablePF()
	}},
	{name: "stale-token-after-reboot", foreign: func(ctx context.Context, t *testing.T, e *pfdntest.Emulator) {
		e.TakeReference(300, "socketfilterfw")
	}, macake: func(ctx context.Context, t *testing.T, h *harness) {
		h.converge(ctx, wanLTE)
	}, after: func(ctx context.Context, t *testing.T, e *pfdntest.Emulator) {
		e.Reboot()
	}},
}

// setup builds the start state and the snapshot teardown must return to.
func (s startState) setup(ctx context.Context, t *testing.T) (*harness, pfdntest.Snapshot) {
	t.Helper()
	h := newHarness(t, nil)
	base := pfdntest.New()
	if s.foreign != nil {
		s.foreign(ctx, t, h.e)
		s.foreign(ctx, t, base)
	}
	if s.macake != nil {
		s.macake(ctx, t, h)
	}
	if s.after != nil {
		s.after(ctx, t, h.e)
		s.after(ctx, t, base)
	}
	h.e.ResetCalls()
	return h, base.Snapshot()
}

// teardown runs Teardown twice (the second must change nothing) and
// checks the Mac is exactly as it was without macake.
func (h *harness) teardown(ctx context.Context, want pfdntest.Snapshot) {
	h.t.Helper()
	if _, err := h.b.Teardown(ctx); err != nil {
		h.t.Fatalf("teardown: %v", err)
	}
	h.e.ResetCalls()
	p, err := h.b.Teardown(ctx)
	if err != nil || !p.Empty() || len(h.e.MutatingCalls()) != 0 {
		h.t.Fatalf("second teardown: %v, plan:\n%s mutating calls %v", err, listing(p), h.e.MutatingCalls())
	}
	if got := h.e.Snapshot(); got.String() != want.String() {
		h.t.Fatalf("after teardown the Mac differs from one macake never touched:\n--- got\n%s--- want\n%s", got, want)
	}
	if h.tokens.PFToken() != "" {
		h.t.Fatalf("token %q still held after teardown", h.tokens.PFToken())
	}
	h.forget(shape.State{})
}

func TestConvergesFromEveryStartState(t *testing.T) {
	for _, s := range startStates {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			h, baseline := s.setup(ctx, t)
			h.converge(ctx, wanLTE)
			h.checkShaped(wanLTE)
			h.noBlackhole(previousConfig)

			// A second run reads and changes nothing.
			h.convergeChangesNothing(ctx, wanLTE, "second apply")
			if n := len(h.e.Calls()); n != 10 {
				t.Errorf("second apply ran %d reads, want 10 (2 plans × 5)", n)
			}
			h.teardown(ctx, baseline)
		})
	}
}

// TestConvergesOneDirectionAtATime: a link that stops shaping one
// direction (download_mode or upload_mode "off") loses that pipe and its
// rule, and only those; the other direction stays shaped; shaping it again
// brings them back; each state, once reached, runs nothing more.
func TestConvergesOneDirectionAtATime(t *testing.T) {
	ctx := context.Background()
	h, baseline := startStates[4].setup(ctx, t) // foreign pipes and anchors
	both := wanLTE
	downOff, upOff := state(both.Links...), state(both.Links...)
	downOff.Links = slices.Clone(both.Links)
	downOff.Links[0].Download = shape.Pipe{}
	upOff.Links = slices.Clone(both.Links)
	upOff.Links[0].Upload = shape.Pipe{}
	upOff.Links[1].Download = shape.Pipe{}
	for i, s := range []shape.State{both, downOff, upOff, downOff, both} {
		h.converge(ctx, s)
		h.checkShaped(s)
		h.noBlackhole(s)
		h.convergeChangesNothing(ctx, s, fmt.Sprintf("state %d", i))
	}
	h.teardown(ctx, baseline)
}

func TestConvergesThroughRandomDesiredStates(t *testing.T) {
	for _, seed := range []uint64{1, 20260501} {
		for _, start := range []int{0, 4} { // empty, foreign-pipes-and-anchors
			s := startStates[start]
			t.Run(fmt.Sprintf("%s/seed-%d", s.name, seed), func(t *testing.T) {
				ctx := context.Background()
				rng := rand.New(rand.NewPCG(seed, 0))
				h, baseline := s.setup(ctx, t)
				prev := shape.State{}
				for i := 0; i < 40; i++ {
					desired := randomState(rng)
					drift(ctx, t, rng, h, prev)
					if _, err := h.apply(ctx, desired, prev); isBlocked(err) {
						// The drift removed the hook; the person puts it back.
						foreignRun(ctx, t, h.e, "", "/sbin/pfctl", "-f", "/etc/pf.conf")
					} else if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					h.converge(ctx, desired)
					if len(desired.Links) > 0 {
						h.checkShaped(desired)
					}
					h.convergeChangesNothing(ctx, desired, fmt.Sprintf("step %d", i))
					prev = desired
				}
				h.teardown(ctx, baseline)
			})
		}
	}
}

var interfaces = []string{"en0", "en1", "en5", "en7", "utun3", "bridge100"}

var icmpAddrs = []netip.Addr{cloudflare, google, cloudflare6, netip.MustParseAddr("9.9.9.9"), netip.MustParseAddr("2001:4860:4860::8888")}

// withPorts are the TCP and UDP reflectors a random link gets beside an
// ICMP reflector it drew (drawn that way so that the random sequence, and
// with it the states of each seed, stays what it was before TCP and UDP
// reflectors existed).
var withPorts = map[netip.Addr][]shape.Reflector{
	cloudflare:  {{Kind: shape.ProbeTCP, Addr: cloudflare, Port: 443}},
	cloudflare6: {{Kind: shape.ProbeTCP, Addr: cloudflare6, Port: 443}},
	google:      {{Kind: shape.ProbeUDP, Addr: netip.MustParseAddr("192.0.2.7"), Port: 7}},
}

func randomState(rng *rand.Rand) shape.State {
	var s shape.State
	n := rng.IntN(5)
	ifaces := rng.Perm(len(interfaces))
	slots := rng.Perm(12)
	for i := 0; i < n; i++ {
		l := shape.Link{
			Name:      fmt.Sprintf("link%d", ifaces[i]),
			Interface: interfaces[ifaces[i]],
			Slot:      slots[i],
			Upload:    randomPipe(rng),
			Download:  randomPipe(rng),
		}
		for _, a := range icmpAddrs {
			if rng.IntN(2) == 0 {
				l.Reflectors = append(l.Reflectors, shape.ICMPReflector(a))
				l.Reflectors = append(l.Reflectors, withPorts[a]...)
			}
		}
		s.Links = append(s.Links, l)
	}
	s.Sort()
	return s
}

// drift changes macake's objects behind its back, as other tools and
// people do, so convergence is tested from damaged states too.
func drift(ctx context.Context, t *testing.T, rng *rand.Rand, h *harness, current shape.State) {
	t.Helper()
	if len(current.Links) == 0 {
		return
	}
	l := current.Links[rng.IntN(len(current.Links))]
	up, _ := h.b.Options().Pipes.Pipe(l.Slot, shape.Upload)
	switch rng.IntN(8) {
	case 0:
		h.e.DeletePipe(up)
	case 1:
		h.e.DeleteAnchor(pfdn.DefaultAnchor)
	case 2:
		foreignRun(ctx, t, h.e, "", "/usr/sbin/dnctl", "pipe", fmt.Sprint(up), "config", "delay", "20")
	case 3:
		foreignRun(ctx, t, h.e, "dummynet out on "+l.Interface+" all pipe "+fmt.Sprint(up)+"\n", "/sbin/pfctl", "-a", pfdn.DefaultAnchor, "-f", "-")
	case 4:
		// Someone releases macake's reference with its own token.
		foreignRun(ctx, t, h.e, "", "/sbin/pfctl", "-X", h.tokens.PFToken())
	case 5:
		h.e.DropHook()
	}
}

// TestRecoversFromAFailureAtEveryStep fails each mutating command of an
// apply in turn (and, separately, of a teardown): the error names the
// command, traffic is never blackholed on the way, the next apply
// converges, and teardown leaves the Mac as macake found it.
func TestRecoversFromAFailureAtEveryStep(t *testing.T) {
	faults := []pfdntest.Fault{
		{MutatingOnly: true, Kind: pfdntest.Fail},
		{MutatingOnly: true, Kind: pfdntest.Fail, AfterEffect: true},
	}
	for si := range startStates {
		s := startStates[si]
		ctx := context.Background()
		probe, _ := s.setup(ctx, t)
		p, err := probe.b.Plan(ctx, wanLTE)
		if err != nil {
			t.Fatal(err)
		}
		steps := p.Commands()
		for fi, f := range faults {
			for step := 1; step <= steps; step++ {
				t.Run(fmt.Sprintf("%s/apply/fault-%d/step-%d", s.name, fi, step), func(t *testing.T) {
					h, baseline := s.setup(ctx, t)
					f.Nth = step
					h.e.AddFault(f)
					_, err := h.apply(ctx, wanLTE, previousConfig)
					requireCommandError(t, err)
					h.e.ClearFaults()
					h.converge(ctx, wanLTE)
					h.checkShaped(wanLTE)
					h.teardown(ctx, baseline)
				})
			}
		}
		// Teardown fails at each of its steps (processes: its pipes go in
		// one dnctl), then is run again.
		probe.converge(ctx, wanLTE)
		probe.e.ResetCalls()
		if _, err := probe.b.Teardown(ctx); err != nil {
			t.Fatal(err)
		}
		tsteps := len(probe.e.MutatingCalls())
		for step := 1; step <= tsteps; step++ {
			t.Run(fmt.Sprintf("%s/teardown/step-%d", s.name, step), func(t *testing.T) {
				h, baseline := s.setup(ctx, t)
				h.converge(ctx, wanLTE)
				h.e.AddFault(pfdntest.Fault{MutatingOnly: true, Nth: step, Kind: pfdntest.Fail})
				_, err := h.b.Teardown(ctx)
				requireCommandError(t, err)
				h.noBlackhole(wanLTE)
				h.e.ClearFaults()
				h.teardown(ctx, baseline)
			})
		}
	}
}

func requireCommandError(t *testing.T, err error) {
	t.Helper()
	var ee *execrun.Error
	if !errors.As(err, &ee) {
		t.Fatalf("got %v, want an *execrun.Error", err)
	}
	if len(ee.Argv) == 0 || ee.ExitCode == 0 || !strings.Contains(err.Error(), strings.Join(ee.Argv, " ")) {
		t.Fatalf("the error does not name the command and its exit: %v", err)
	}
}

func TestRecoversFromAHungCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h, baseline := startStates[0].setup(ctx, t)
		h.e.AddFault(pfdntest.Fault{Match: `^pfctl -a com\.apple/macake -f -`, Nth: 1, Kind: pfdntest.Hang})
		_, err := h.apply(ctx, wanLTE)
		var ee *execrun.Error
		if !errors.As(err, &ee) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hung load: %v", err)
		}
		h.converge(ctx, wanLTE)
		h.teardown(ctx, baseline)
	})
}

func TestPlanRefusesGarbageOutput(t *testing.T) {
	reads := []string{`^pfctl -s dummynet`, `^pfctl -a \S+ -s dummynet`, `^pfctl -s info`, `^pfctl -s References`, `^dnctl list`}
	for _, r := range reads {
		t.Run(r, func(t *testing.T) {
			ctx := context.Background()
			h := shapedWanLTE(t)
			h.e.ResetCalls()
			h.e.AddFault(pfdntest.Fault{Match: r, Kind: pfdntest.Garbage})
			p, err := h.b.Plan(ctx, wanLTE)
			if err == nil || !strings.Contains(err.Error(), "line 1") && !strings.Contains(err.Error(), "Status") {
				t.Fatalf("garbage from %s: plan %v, err %v", r, p, err)
			}
			if len(h.e.MutatingCalls()) != 0 {
				t.Fatal("planning ran a mutating command")
			}
		})
	}
}

func isBlocked(err error) bool {
	_, ok := backend.Blocked(err)
	return ok
}
