// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// harness is one emulated Mac with a backend driving it. known plays the
// state file's slots as the reconciler keeps them: a link's slot is
// recorded before anything is applied for it (record) and dropped only
// once the live state matches without it (forget), so the pipes of every
// slot in it are provably macake's.
type harness struct {
	t      testing.TB
	e      *pfdntest.Emulator
	b      *pfdn.Backend
	tokens *pfdn.MemoryTokens
	known  map[string]int
}

func newHarness(t testing.TB, e *pfdntest.Emulator) *harness {
	t.Helper()
	if e == nil {
		e = pfdntest.New()
	}
	tokens := &pfdn.MemoryTokens{}
	h := &harness{t: t, e: e, tokens: tokens, known: map[string]int{}}
	opts := pfdn.DefaultOptions()
	opts.KnownLinks = func() map[string]int { return maps.Clone(h.known) }
	b, err := pfdn.New(e, tokens, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.b = b
	return h
}

// record adds desired's slots to the state file, as apply does before it
// changes anything.
func (h *harness) record(desired shape.State) {
	for _, l := range desired.Links {
		h.known[l.Name] = l.Slot
	}
}

// forget drops the slots desired no longer uses, as apply does once the
// live state matches.
func (h *harness) forget(desired shape.State) {
	keep := map[string]bool{}
	for _, l := range desired.Links {
		keep[l.Name] = true
	}
	for name := range h.known {
		if !keep[name] {
			delete(h.known, name)
		}
	}
}

// apply plans and executes every op in order, stopping at the first
// failure. After each op it checks that macake blackholed nothing: no
// interface of desired or watch whose traffic flowed before the apply may
// be blackholed afterwards (drift may have blackholed some already).
func (h *harness) apply(ctx context.Context, desired shape.State, watch ...shape.State) (plan.Plan, error) {
	h.t.Helper()
	states := append([]shape.State{desired}, watch...)
	before := h.blackholed(states...)
	for _, l := range desired.Links {
		// A slot another link held: the state file would give the new one
		// another slot; tests move links between slots deliberately, so
		// the old holder's record goes (its pipes are now the new one's).
		for name, slot := range h.known {
			if slot == l.Slot && name != l.Name {
				delete(h.known, name)
			}
		}
	}
	h.record(desired)
	p, err := h.b.Plan(ctx, desired)
	if err != nil {
		return p, err
	}
	for _, op := range p.Ops {
		err := h.b.Execute(ctx, op)
		for k, v := range h.blackholed(states...) {
			if _, was := before[k]; !was {
				h.t.Fatalf("after %s %s, traffic %s is blackholed: %s", op.Action, op.Label, k, v)
			}
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

// shapedWanLTE is a harness on which wanLTE was applied (and converged):
// the starting point of most tests of a shaped Mac.
func shapedWanLTE(t testing.TB) *harness {
	t.Helper()
	h := newHarness(t, nil)
	h.converge(context.Background(), wanLTE)
	return h
}

// converge applies and then requires an empty re-plan.
func (h *harness) converge(ctx context.Context, desired shape.State) {
	h.t.Helper()
	if _, err := h.apply(ctx, desired); err != nil {
		h.t.Fatalf("apply: %v", err)
	}
	p, err := h.b.Plan(ctx, desired)
	if err != nil {
		h.t.Fatalf("re-plan: %v", err)
	}
	if !p.Empty() {
		h.t.Fatalf("re-plan after apply is not empty:\n%s", listing(p))
	}
	h.forget(desired)
}

// convergeChangesNothing converges again to desired, already reached,
// and requires that it ran no mutating command. what names the state in
// the failure.
func (h *harness) convergeChangesNothing(ctx context.Context, desired shape.State, what string) {
	h.t.Helper()
	h.e.ResetCalls()
	h.converge(ctx, desired)
	if m := h.e.MutatingCalls(); len(m) != 0 {
		h.t.Fatalf("%s: a converged state ran %d mutating commands: %+v", what, len(m), m)
	}
}

// blackholed probes every interface of the given states in both
// directions and returns those whose traffic a rule sends to a missing
// pipe (or to a queue, which can panic the Mac).
func (h *harness) blackholed(states ...shape.State) map[string]string {
	out := map[string]string{}
	for _, s := range states {
		for _, l := range s.Links {
			for _, dir := range []bool{true, false} {
				src, dst := netip.MustParseAddrPort("192.168.1.23:52144"), netip.MustParseAddrPort("93.184.216.34:443")
				if !dir {
					src, dst = dst, src
				}
				r := h.e.Probe(pfdntest.Packet{Interface: l.Interface, Out: dir, Proto: "tcp", Src: src, Dst: dst})
				if r.Verdict == pfdntest.Blackholed || r.Verdict == pfdntest.Panic {
					out[fmt.Sprintf("%s out=%v", l.Interface, dir)] = fmt.Sprintf("%s: %s (%s)", r.Verdict, r.Reason, r.Rule)
				}
			}
		}
	}
	return out
}

// noBlackhole requires that no traffic of the states is blackholed.
func (h *harness) noBlackhole(states ...shape.State) {
	h.t.Helper()
	for k, v := range h.blackholed(states...) {
		h.t.Fatalf("traffic %s is %s", k, v)
	}
}

// checkShaped verifies that the emulated Mac shapes exactly as desired:
// each link's traffic goes through its pipes, its probes are exempt, and
// the pipes hold the quantised configuration.
func (h *harness) checkShaped(desired shape.State) {
	h.t.Helper()
	ctx := context.Background()
	live, err := h.b.Observe(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	if !live.Info.Enabled || !live.HoldsToken(h.tokens.PFToken()) {
		h.t.Fatalf("pf enabled %v, macake's token %q live %v", live.Info.Enabled, h.tokens.PFToken(), live.HoldsToken(h.tokens.PFToken()))
	}
	o := h.b.Options()
	for _, l := range desired.Links {
		for _, dir := range shape.Directions {
			n, _ := o.Pipes.Pipe(l.Slot, dir)
			lp, ok := live.Dummynet.Pipe(n)
			src, dst := netip.MustParseAddrPort("192.168.1.23:1000"), netip.MustParseAddrPort("203.0.113.9:443")
			if dir == shape.Download {
				src, dst = dst, src
			}
			r := h.e.Probe(pfdntest.Packet{Interface: l.Interface, Out: dir == shape.Upload, Proto: "udp", Src: src, Dst: dst})
			if !l.Pipe(dir).Shaped() {
				// A direction the link does not shape: no pipe, and its
				// traffic passes.
				if ok || r.Verdict != pfdntest.Unshaped {
					h.t.Fatalf("%s %s is not to be shaped: pipe %d live %v, traffic %+v", l.Name, dir, n, ok, r)
				}
				continue
			}
			if want := pfdn.Quantize(l.Pipe(dir)).Config(); !ok || lp.Config != want {
				h.t.Fatalf("pipe %d: %+v, want %+v", n, lp.Config, want)
			}
			if r.Verdict != pfdntest.Shaped || r.Pipe != n {
				h.t.Fatalf("%s %s traffic: %+v, want pipe %d", l.Name, dir, r, n)
			}
		}
		for _, refl := range l.Reflectors {
			h.checkExempt(l, refl)
		}
	}
}

// checkExempt asserts that the emulated pf lets a reflector's probes and
// their replies bypass the shaper, and nothing else to the same address.
func (h *harness) checkExempt(l shape.Link, refl shape.Reflector) {
	h.t.Helper()
	a := refl.Addr.Unmap()
	me := netip.MustParseAddr("192.168.1.23")
	if a.Is6() {
		me = netip.MustParseAddr("2001:db8::23")
	}
	proto, port := "icmp", uint16(0)
	switch {
	case refl.Kind == shape.ProbeTCP:
		proto, port = "tcp", refl.Port
	case refl.Kind == shape.ProbeUDP:
		proto, port = "udp", refl.Port
	case a.Is6():
		proto = "ipv6-icmp"
	}
	other := shape.Reflector{Kind: refl.Kind, Addr: a, Port: port + 1}
	for _, out := range []bool{true, false} {
		src, dst := netip.AddrPortFrom(me, 40000), netip.AddrPortFrom(a, port)
		if !out {
			src, dst = dst, src
		}
		if r := h.e.Probe(pfdntest.Packet{Interface: l.Interface, Out: out, Proto: proto, Src: src, Dst: dst}); r.Verdict != pfdntest.Unshaped {
			h.t.Fatalf("probe to reflector %s (out=%v) is %s, want exempt", refl, out, r.Verdict)
		}
		if !refl.Kind.HasPort() || slices.ContainsFunc(l.Reflectors, func(o shape.Reflector) bool {
			return o.Kind == other.Kind && o.Addr.Unmap() == a && o.Port == other.Port
		}) {
			continue
		}
		// The same address on another port is user traffic: shaped.
		src, dst = netip.AddrPortFrom(me, 40000), other.AddrPort()
		if !out {
			src, dst = dst, src
		}
		if r := h.e.Probe(pfdntest.Packet{Interface: l.Interface, Out: out, Proto: proto, Src: src, Dst: dst}); r.Verdict != pfdntest.Shaped {
			h.t.Fatalf("%s traffic to %s (out=%v) is %s, want shaped: only the reflector's port is exempt", proto, other.AddrPort(), out, r.Verdict)
		}
	}
}

// listing renders a plan as plain text: ops with their fields and exact
// commands, then warnings.
func listing(p plan.Plan) string {
	var b strings.Builder
	if p.Empty() {
		b.WriteString("No changes.\n")
	}
	for _, op := range p.Ops {
		fmt.Fprintf(&b, "%s %s [kind %s, id %s", op.Action.Symbol(), op.Label, op.Kind, op.ID)
		if op.Link != "" || op.Interface != "" {
			fmt.Fprintf(&b, ", link %q on %q", op.Link, op.Interface)
		}
		fmt.Fprintf(&b, "] %s\n", op.Reason)
		for _, f := range op.Fields {
			before, after := f.Before, f.After
			if before == "" {
				before = "(none)"
			}
			if after == "" {
				after = "(none)"
			}
			fmt.Fprintf(&b, "    %s: %s -> %s {%s: %v -> %v}\n", f.Name, before, after, f.Key, f.BeforeValue, f.AfterValue)
		}
		if op.Unchanged > 0 {
			fmt.Fprintf(&b, "    (%d unchanged)\n", op.Unchanged)
		}
		for _, c := range op.Commands {
			fmt.Fprintf(&b, "    $ %s\n", strings.Join(c.Argv, " "))
			for _, l := range strings.SplitAfter(c.Stdin, "\n") {
				if l != "" {
					fmt.Fprintf(&b, "      | %s", l)
				}
			}
		}
	}
	for _, w := range p.Warnings {
		if w.Link != "" {
			fmt.Fprintf(&b, "warning (%s): %s\n", w.Link, w.Message)
		} else {
			fmt.Fprintf(&b, "warning: %s\n", w.Message)
		}
	}
	return b.String()
}

var (
	cloudflare  = netip.MustParseAddr("1.1.1.1")
	google      = netip.MustParseAddr("8.8.8.8")
	cloudflare6 = netip.MustParseAddr("2606:4700:4700::1111")
)

func link(name, iface string, slot int, upMbit, downMbit float64, queueBytes int64, refl ...netip.Addr) shape.Link {
	return shape.Link{
		Name: name, Interface: iface, Slot: slot,
		Upload:     shape.Pipe{RateBits: int64(upMbit * 1e6), QueueBytes: queueBytes},
		Download:   shape.Pipe{RateBits: int64(downMbit * 1e6), QueueBytes: queueBytes * 4},
		Reflectors: shape.ICMPReflectors(refl),
	}
}

func state(links ...shape.Link) shape.State { return shape.State{Links: links} }

// randomPipe draws a rate from 1 bit/s to 3 Gbit/s and a queue from 1 B to
// 2 MB, log-uniformly, so the edges (clamps, 1 Kbit/s, 1 KB) come up often.
func randomPipe(rng *rand.Rand) shape.Pipe {
	logUniform := func(max float64) int64 { return int64(math.Pow(max, rng.Float64())) }
	return shape.Pipe{RateBits: logUniform(3e9), QueueBytes: logUniform(2 << 20)}
}

var pipeList = execrun.Command{Argv: []string{"/usr/sbin/dnctl", "list"}}
