// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// These tests shape veths inside network namespaces of their own
// (kernelNetns), on the real kernel, once per shaper it has
// (forEachShape). They need root.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to create network namespaces and tc objects on the real kernel (CI runs as root)")
	}
	for _, tool := range []string{"tc", "ip"} {
		if p := toolPath("", tool); !strings.HasPrefix(p, "/") {
			t.Skipf("skipping: %s (iproute2) is not installed", tool)
		}
	}
}

// sh runs a command the test needs to succeed and returns its stdout.
func sh(t *testing.T, argv ...string) string {
	t.Helper()
	cmd := execrun.Command{Argv: argv}
	res, err := execrun.Exec{}.Run(context.Background(), cmd)
	if _, err = execrun.Check(cmd, res, err); err != nil {
		t.Fatalf("%v", err)
	}
	return string(res.Stdout)
}

// kernelNetns gives the test a namespace of its own (a netns.Lab's,
// removed when the test ends; the backend acts in it by the name this
// returns) holding a veth pair DEV–peerN, both ends in it, for the N-th
// of devs.
func kernelNetns(t *testing.T, devs ...string) string {
	t.Helper()
	lab := netns.New(t, "tc")
	ns := lab.Namespace("k")
	for i, dev := range devs {
		lab.Link(ns, dev, ns, fmt.Sprintf("peer%d", i))
	}
	return ns.Name()
}

func apply(t *testing.T, b *Backend, desired shape.State) plan.Plan {
	t.Helper()
	ctx := context.Background()
	p, err := b.Plan(ctx, desired)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	for _, op := range p.Ops {
		if err := b.Execute(ctx, op); err != nil {
			t.Fatalf("execute: %v", err)
		}
	}
	return p
}

func mustConverge(t *testing.T, b *Backend, desired shape.State) {
	t.Helper()
	p, err := b.Plan(context.Background(), desired)
	if err != nil {
		t.Fatalf("re-plan: %v", err)
	}
	if !p.Empty() {
		t.Fatalf("re-plan after apply is not empty:\n%s", formatPlan(p))
	}
}

func wanLink(iface string, slot int) shape.Link {
	return shape.Link{
		Name: "wan", Interface: iface, Slot: slot,
		Upload:     shape.Pipe{RateBits: 20_000_000, QueueBytes: 64 << 10},
		Download:   shape.Pipe{RateBits: 30_123_456, QueueBytes: 128 << 10},
		Reflectors: shape.ICMPReflectors([]netip.Addr{netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("fd77::2")}),
	}
}

// observe reads the live state of ns through the package's own parser.
func observe(t *testing.T, b *Backend) Live {
	t.Helper()
	live, err := b.Observe(context.Background())
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	return live
}

// assertNothingOwned checks that no object macake owns is left in ns, and
// that the backend keeps no ownership record either.
func assertNothingOwned(t *testing.T, b *Backend) {
	t.Helper()
	assertNoLiveObjects(t, b)
	mustConverge(t, b, shape.State{})
}

// assertNoLiveObjects checks that no object macake owns is left in ns.
func assertNoLiveObjects(t *testing.T, b *Backend) {
	t.Helper()
	live := observe(t, b)
	for name, d := range live.Devices {
		if _, ours := IFBSlot(name); ours {
			t.Errorf("IFB %s survived teardown", name)
		}
		if d.ownsRoot() {
			t.Errorf("macake's root qdisc survived on %s", name)
		}
		for _, f := range d.IngressFilters {
			if !f.Header && (f.Pref == RedirectPref || isExemptPref(f.Pref)) {
				t.Errorf("macake's filter at pref %d survived on %s", f.Pref, name)
			}
		}
	}
}

// foreignNeighbours adds to ns what is others' beside macake's links, and
// must stay as it is: someone else's filter on the ingress hook of the
// veth lan0 (kernelNetns makes it), and an IFB with its own qdisc.
func foreignNeighbours(t *testing.T, ns string) {
	t.Helper()
	sh(t, "ip", "-n", ns, "link", "add", "name", "ifb0", "type", "ifb")
	sh(t, "tc", "-n", ns, "qdisc", "add", "dev", "ifb0", "root", "handle", "8001:", "pfifo", "limit", "50")
	sh(t, "tc", "-n", ns, "qdisc", "add", "dev", "lan0", "handle", "ffff:", "ingress")
	sh(t, "tc", "-n", ns, "filter", "add", "dev", "lan0", "ingress", "protocol", "ip", "pref", "10", "u32",
		"match", "ip", "src", "10.99.0.0/16", "flowid", "ffff:1")
}

func TestKernelApplyConvergesSetRateAndTeardown(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns := kernelNetns(t, "wan0", "lan0")
		foreignNeighbours(t, ns)

		b := ks.backend(t, ns, execrun.Exec{})
		caps := b.Capabilities(context.Background())
		if !caps.Tried || !caps.HTB || !caps.BFIFO || !caps.IFB || !caps.Mirred {
			t.Fatalf("probe on this kernel = %+v, want htb, bfifo, ifb and mirred found by trying", caps)
		}
		t.Logf("capabilities: %s", strings.Join(caps.Report(), "; "))

		wan := wanLink("wan0", 3)
		lan := shape.Link{Name: "lan", Interface: "lan0", Slot: 4,
			Upload: shape.Pipe{RateBits: 5_000_000, QueueBytes: 20_000}, Download: shape.Pipe{RateBits: 8_000_000, QueueBytes: 30_000}}
		desired := shape.State{Links: []shape.Link{wan, lan}}
		p := apply(t, b, desired)
		t.Logf("applied:\n%s", formatPlan(p))
		mustConverge(t, b, desired)

		// Independent check with tc's own text output, not our parser.
		wantUp, wantDown := "class htb 4d4b:1 root leaf 4d4c: prio 0 rate 20Mbit", "bfifo 4d4c: parent 4d4b:1 limit 128Kb"
		showUp := sh(t, "tc", "-n", ns, "class", "show", "dev", "wan0")
		if ks.cake {
			wantUp, wantDown = "cake 4d4c: parent 4d4b:2 bandwidth 20Mbit", "cake 4d4c: parent 4d4b:2 bandwidth 30123Kbit"
			showUp = sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "wan0")
		}
		if !strings.Contains(showUp, wantUp) {
			t.Errorf("wan0 is not shaped at 20Mbit (want %q):\n%s", wantUp, showUp)
		}
		if out := sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "ifb-macake3"); !strings.Contains(out, wantDown) {
			t.Errorf("ifb-macake3 has no %q:\n%s", wantDown, out)
		}
		if out := sh(t, "tc", "-n", ns, "filter", "show", "dev", "lan0", "ingress"); !strings.Contains(out, "ifb-macake4") {
			t.Errorf("lan0's ingress does not redirect to ifb-macake4:\n%s", out)
		}
		assertShaper(t, b, ks, "wan0", 20_000_000, 64<<10)
		assertShaper(t, b, ks, "ifb-macake3", 30_123_456, 128<<10)

		// SetRate: one process per call, and the kernel shows the new values.
		counting := &faultyRunner{inner: execrun.Exec{}}
		b.Runner = counting
		ctx := context.Background()
		if err := b.SetRate(ctx, wan, shape.Upload, shape.Pipe{RateBits: 25_000_000, QueueBytes: 50_000}); err != nil {
			t.Fatalf("SetRate upload: %v", err)
		}
		if err := b.SetRate(ctx, wan, shape.Download, shape.Pipe{RateBits: 41_234_567, QueueBytes: 70_000}); err != nil {
			t.Fatalf("SetRate download: %v", err)
		}
		if n := counting.count(); n != 2 {
			t.Errorf("two SetRate calls ran %d commands, want exactly 2", n)
		}
		b.Runner = execrun.Exec{}
		assertShaper(t, b, ks, "wan0", 25_000_000, 50_000)
		assertShaper(t, b, ks, "ifb-macake3", 41_234_567, 70_000)
		wan.Upload = shape.Pipe{RateBits: 25_000_000, QueueBytes: 50_000}
		wan.Download = shape.Pipe{RateBits: 41_234_567, QueueBytes: 70_000}
		desired = shape.State{Links: []shape.Link{wan, lan}}
		mustConverge(t, b, desired)

		// Teardown removes what macake owns and nothing else.
		tp, err := b.Teardown(ctx)
		if err != nil {
			t.Fatalf("teardown: %v", err)
		}
		t.Logf("teardown:\n%s", formatPlan(tp))
		assertNothingOwned(t, b)
		if out := sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "ifb0"); !strings.Contains(out, "pfifo 8001:") {
			t.Errorf("foreign ifb0's qdisc did not survive:\n%s", out)
		}
		if out := sh(t, "tc", "-n", ns, "filter", "show", "dev", "lan0", "ingress"); !strings.Contains(out, "pref 10 ") {
			t.Errorf("foreign filter on lan0 did not survive:\n%s", out)
		}
		if out := sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "wan0"); strings.Contains(out, "ingress") {
			t.Errorf("the ingress qdisc macake added to wan0 survived:\n%s", out)
		}
		if tp2, err := b.Teardown(ctx); err != nil || !tp2.Empty() {
			t.Errorf("second teardown = %v, %v; want nothing to do", formatPlan(tp2), err)
		}
	})
}

// drift is a change someone makes by hand, and the op kind whose repair
// the next plan must contain.
type drift struct {
	name string
	argv []string
	want string
}

// shapeDrifts are the drifts of ks's own objects: its rate, its queue or
// options, its leaf, its exemptions.
func shapeDrifts(ns string, ks kernelShape) []drift {
	tcn := func(args ...string) []string { return append([]string{"tc", "-n", ns}, args...) }
	if !ks.cake {
		return []drift{
			{"class rate changed by hand", tcn("class", "change", "dev", "wan0", "parent", "4d4b:", "classid", "4d4b:1", "htb", "rate", "5mbit"), "shaper"},
			{"leaf limit changed by hand", tcn("qdisc", "change", "dev", "ifb-macake0", "parent", "4d4b:1", "handle", "4d4c:", "bfifo", "limit", "1000"), "shaper"},
			{"class deleted", tcn("class", "del", "dev", "wan0", "classid", "4d4b:1"), "shaper"},
			{"egress exemption deleted", tcn("filter", "del", "dev", "wan0", "parent", "4d4b:", "pref", "19785"), "exemptions"},
		}
	}
	leaf := func(dev string, opts ...string) []string {
		return tcn(append([]string{"qdisc", "change", "dev", dev, "parent", "4d4b:2", "handle", "4d4c:", "cake"}, opts...)...)
	}
	return []drift{
		{"CAKE bandwidth changed by hand", leaf("wan0", "bandwidth", "5mbit"), "shaper"},
		{"isolation changed by hand", leaf("ifb-macake0", "dual-dsthost"), "shaper"},
		// tc cannot name diffserv3: the repair deletes and adds the leaf.
		{"diffserv changed by hand", leaf("wan0", "diffserv8"), "shaper"},
		{"overhead, mpu and memlimit added by hand", leaf("wan0", "overhead", "44", "mpu", "84", "memlimit", "1mb", "atm"), "shaper"},
		{"wash, rtt and split-gso changed by hand", leaf("ifb-macake0", "wash", "rtt", "20ms", "no-split-gso", "egress"), "shaper"},
		{"CAKE leaf deleted", tcn("qdisc", "del", "dev", "wan0", "parent", "4d4b:2", "handle", "4d4c:"), "shaper"},
		{"CAKE leaf replaced by a pfifo", tcn("qdisc", "replace", "dev", "wan0", "parent", "4d4b:2", "handle", "8003:", "pfifo"), "shaper"},
		{"priomap changed by hand", tcn("qdisc", "change", "dev", "wan0", "root", "handle", "4d4b:", "prio", "bands", "2", "priomap", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0"), "shaper"},
		{"egress exemption deleted", tcn("filter", "del", "dev", "wan0", "parent", "4d4b:", "pref", "19785"), "exemptions"},
	}
}

func TestKernelDriftIsRepaired(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns, b := ks.onWan0(t, ks.netlinkBackend)
		desired := shape.State{Links: []shape.Link{wanLink("wan0", 0)}}
		apply(t, b, desired)

		drifts := append(shapeDrifts(ns, ks), []drift{
			{"qdisc on macake's IFB replaced", []string{"tc", "-n", ns, "qdisc", "replace", "dev", "ifb-macake0", "root", "handle", "8001:", "pfifo"}, "shaper"},
			{"root qdisc deleted", []string{"tc", "-n", ns, "qdisc", "del", "dev", "wan0", "root"}, "shaper"},
			{"redirect deleted", []string{"tc", "-n", ns, "filter", "del", "dev", "wan0", "ingress", "pref", "19787"}, "redirect"},
			{"ingress exemption deleted", []string{"tc", "-n", ns, "filter", "del", "dev", "wan0", "ingress", "pref", "19786"}, "exemptions"},
			{"IFB deleted under the redirect", []string{"ip", "-n", ns, "link", "del", "dev", "ifb-macake0"}, "ifb"},
			{"IFB set down", []string{"ip", "-n", ns, "link", "set", "dev", "ifb-macake0", "down"}, "ifb"},
			{"ingress qdisc deleted", []string{"tc", "-n", ns, "qdisc", "del", "dev", "wan0", "ingress"}, "redirect"},
		}...)
		for _, d := range drifts {
			sh(t, d.argv...)
			p := apply(t, b, desired)
			found := false
			for _, op := range p.Ops {
				found = found || op.Kind == d.want
			}
			if !found {
				t.Errorf("%s: repair plan has no %s op:\n%s", d.name, d.want, formatPlan(p))
			}
			mustConverge(t, b, desired)
			assertShaper(t, b, ks, "wan0", 20_000_000, 64<<10)
			assertShaper(t, b, ks, "ifb-macake0", 30_123_456, 128<<10)
		}
	})
}

// A foreign root, CAKE where the kernel has it, is refused and never
// replaced, and down leaves it (and the ingress qdisc that was there
// first) as it found them.
func TestKernelForeignRootIsRefusedNotReplaced(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns := kernelNetns(t, "wan0")
		foreign, shown, warned := []string{"pfifo", "limit", "77"}, "limit 77p", "pfifo 8001:"
		if ks.cake {
			foreign, shown, warned = []string{"cake", "bandwidth", "77mbit", "besteffort"}, "bandwidth 77Mbit besteffort", "cake 8001:"
		}
		sh(t, append([]string{"tc", "-n", ns, "qdisc", "add", "dev", "wan0", "root", "handle", "8001:"}, foreign...)...)
		sh(t, "tc", "-n", ns, "qdisc", "add", "dev", "wan0", "handle", "ffff:", "ingress")
		before := sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "wan0")
		b := ks.netlinkBackend(t, ns, execrun.Exec{})
		desired := shape.State{Links: []shape.Link{wanLink("wan0", 0)}}
		p := apply(t, b, desired)
		if !hasWarning(p, "root qdisc macake does not own ("+warned+")") {
			t.Errorf("no warning about the foreign root:\n%s", formatPlan(p))
		}
		for _, op := range p.Ops {
			if op.ID == "wan0" && op.Kind == "shaper" {
				t.Errorf("plan touches the foreign root: %s", op.Label)
			}
		}
		if out := sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "wan0"); !strings.Contains(out, warned+" root") || !strings.Contains(out, shown) {
			t.Errorf("foreign root changed:\n%s", out)
		}
		// Download is still shaped; the next plan only repeats the warning.
		p, err := b.Plan(context.Background(), desired)
		if err != nil || !p.Empty() || !hasWarning(p, warned) {
			t.Errorf("re-plan = %s, %v; want no ops and the warning again", formatPlan(p), err)
		}
		assertShaper(t, b, ks, "ifb-macake0", 30_123_456, 128<<10)
		apply(t, b, shape.State{})
		assertNothingOwned(t, b)
		if after := sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "wan0"); after != before {
			t.Errorf("down changed what was there before macake:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// TestKernelReplacedRootIsRestored: someone replaces macake's root on
// an interface it shaped; the next plan restores it in one replace (with
// its probe exemptions), converges, and the foreign qdisc is gone. A
// backend that never recorded the root (the state file lost, as if the
// pfifo had been there first) leaves the same pfifo alone.
func TestKernelReplacedRootIsRestored(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns, b := ks.onWan0(t, ks.netlinkBackend)
		desired := shape.State{Links: []shape.Link{wanLink("wan0", 0)}}
		apply(t, b, desired)
		mustConverge(t, b, desired)

		sh(t, "tc", "-n", ns, "qdisc", "replace", "dev", "wan0", "root", "handle", "1:", "pfifo", "limit", "100")
		forgetful := ks.backend(t, ns, execrun.Exec{})
		p, err := forgetful.Plan(context.Background(), desired)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Empty() || !hasWarning(p, "root qdisc macake does not own (pfifo 1:)") {
			t.Errorf("a backend without the record plans:\n%s\nwant no ops and the foreign-root warning", formatPlan(p))
		}

		p = apply(t, b, desired)
		if len(p.Ops) == 0 || p.Ops[0].ID != "wan0" || !strings.Contains(p.Ops[0].Reason, "replaced by someone else (pfifo 1:)") {
			t.Errorf("the repair does not start by restoring wan0's root:\n%s", formatPlan(p))
		}
		mustConverge(t, b, desired)
		if out := sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "wan0"); strings.Contains(out, "pfifo 1:") {
			t.Errorf("wan0 after the repair:\n%s", out)
		}
		assertShaper(t, b, ks, "wan0", 20_000_000, 64<<10)
		if out := sh(t, "tc", "-n", ns, "filter", "show", "dev", "wan0", "parent", "4d4b:"); !strings.Contains(out, "pref 19785") || !strings.Contains(out, "pref 19786") {
			t.Errorf("the egress probe exemptions were not restored:\n%s", out)
		}
	})
}

func TestKernelFailureMidApplyConvergesNextPlan(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		_, b := ks.onWan0(t, ks.backend)
		desired := shape.State{Links: []shape.Link{wanLink("wan0", 1)}}
		ctx := context.Background()
		p, err := b.Plan(ctx, desired)
		if err != nil {
			t.Fatal(err)
		}
		// Fail the command under the download shaper's root (htb's class,
		// CAKE's leaf): the IFB and its root qdisc exist, what shapes does
		// not.
		under := "dev ifb-macake1 parent " + pick(ks.cake, ks.leafParentArg(), rootHandleArg)
		faulty := &faultyRunner{inner: execrun.Exec{}, fail: func(_ int, cmd execrun.Command) bool {
			return strings.Contains(strings.Join(cmd.Argv, " "), under)
		}}
		b.Runner = faulty
		var failed bool
		for _, op := range p.Ops {
			if err := b.Execute(ctx, op); err != nil {
				if !strings.Contains(err.Error(), "injected failure") || !strings.Contains(err.Error(), "ifb-macake1") {
					t.Errorf("error does not say what failed: %v", err)
				}
				failed = true
				break
			}
		}
		if !failed {
			t.Fatal("the injected failure did not surface")
		}
		b.Runner = execrun.Exec{}
		p = apply(t, b, desired)
		if len(p.Ops) == 0 {
			t.Fatal("the plan after a failed apply has nothing to do")
		}
		mustConverge(t, b, desired)
		assertShaper(t, b, ks, "ifb-macake1", 30_123_456, 128<<10)
	})
}

func TestKernelInterfaceRenamedOrMissing(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns, b := ks.onWan0(t, ks.backend)
		desired := shape.State{Links: []shape.Link{wanLink("wan0", 2)}}
		apply(t, b, desired)

		sh(t, "ip", "-n", ns, "link", "set", "dev", "wan0", "down")
		sh(t, "ip", "-n", ns, "link", "set", "dev", "wan0", "name", "wan9")
		p := apply(t, b, desired)
		if !hasWarning(p, "interface wan0 not found") {
			t.Errorf("no warning about the missing interface:\n%s", formatPlan(p))
		}
		// What macake left on the renamed device is no longer any link's:
		// gone. wan0 stays recorded as macake's, since the link still wants it.
		assertNoLiveObjects(t, b)
		if !b.owners().OwnedRoots()["wan0"] {
			t.Errorf("the record of wan0 was dropped while its link still wants it")
		}

		sh(t, "ip", "-n", ns, "link", "set", "dev", "wan9", "name", "wan0")
		sh(t, "ip", "-n", ns, "link", "set", "dev", "wan0", "up")
		apply(t, b, desired)
		mustConverge(t, b, desired)

		// SetRate on a vanished interface fails clearly instead of guessing.
		sh(t, "ip", "-n", ns, "link", "del", "dev", "wan0")
		err := b.SetRate(context.Background(), desired.Links[0], shape.Upload, shape.Pipe{RateBits: 1e6, QueueBytes: 5000})
		if err == nil || !IsNotFound(err) || !strings.Contains(err.Error(), "renamed") {
			t.Errorf("SetRate on a missing interface = %v, want a not-found error with a hint", err)
		}
	})
}

func hasWarning(p plan.Plan, sub string) bool {
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, sub) {
			return true
		}
	}
	return false
}

// faultyRunner passes commands to an inner runner, except the ones fail
// selects, which fail the way tc does (exit 2, an error on stderr).
type faultyRunner struct {
	inner execrun.Runner
	mu    sync.Mutex
	n     int
	fail  func(n int, cmd execrun.Command) bool
	calls []execrun.Command
}

func (r *faultyRunner) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	r.mu.Lock()
	r.n++
	n := r.n
	r.calls = append(r.calls, cmd)
	r.mu.Unlock()
	if r.fail != nil && r.fail(n, cmd) {
		return execrun.Result{ExitCode: 2, Stderr: []byte("Error: injected failure.\n")}, nil
	}
	return r.inner.Run(ctx, cmd)
}

func (r *faultyRunner) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// TestKernelIngressThereFirstSurvivesDown is issue 12's reproduction: an
// empty ingress qdisc someone added before macake is still there after
// apply and down, with macake's filters gone from it, while the ingress
// qdisc macake adds itself on another interface goes with down.
func TestKernelIngressThereFirstSurvivesDown(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns := kernelNetns(t, "wan0", "wan1")
		sh(t, "tc", "-n", ns, "qdisc", "add", "dev", "wan0", "handle", "ffff:", "ingress")
		b := ks.netlinkBackend(t, ns, execrun.Exec{})
		lte := wanLink("wan1", 1)
		lte.Name = "lte"
		desired := shape.State{Links: []shape.Link{wanLink("wan0", 0), lte}}
		apply(t, b, desired)
		mustConverge(t, b, desired)
		apply(t, b, shape.State{})
		assertNothingOwned(t, b)
		if out := sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "wan0"); !strings.Contains(out, "qdisc ingress ffff:") {
			t.Errorf("the ingress qdisc that was there first is gone after down:\n%s", out)
		}
		if out := sh(t, "tc", "-n", ns, "qdisc", "show", "dev", "wan1"); strings.Contains(out, "ingress") {
			t.Errorf("the ingress qdisc macake added survived down:\n%s", out)
		}
	})
}

// TestKernelOneDirectionAtATime: on the real kernel, a link that shapes
// its upload only has its root qdisc and no IFB, redirect or ingress
// exemptions; turned the other way round, the root goes and the IFB and
// redirect come; with both directions again everything is there; each
// state, once applied, plans nothing; teardown leaves nothing.
func TestKernelOneDirectionAtATime(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		ns, b := ks.onWan0(t, ks.netlinkBackend)
		both := wanLink("wan0", 2)
		uploadOnly, downloadOnly := both, both
		uploadOnly.Download = shape.Pipe{}
		downloadOnly.Upload = shape.Pipe{}
		for _, c := range []struct {
			name     string
			link     shape.Link
			root     bool // macake's root qdisc on wan0
			download bool // the IFB, with the redirect to it
		}{
			{"upload only", uploadOnly, true, false},
			{"download only", downloadOnly, false, true},
			{"both", both, true, true},
			{"upload only again", uploadOnly, true, false},
		} {
			desired := shape.State{Links: []shape.Link{c.link}}
			apply(t, b, desired)
			mustConverge(t, b, desired)
			live := observe(t, b)
			wan, ifb := live.Devices["wan0"], live.Devices[IFBName(2)]
			redirect := false
			for _, f := range wan.IngressFilters {
				redirect = redirect || isOurRedirect(f)
			}
			if wan.ownsRoot() != c.root || (ifb != nil) != c.download || redirect != c.download {
				t.Errorf("%s: macake's root on wan0 %v, IFB %v, redirect %v; want %v, %v, %v\n%s", c.name,
					wan.ownsRoot(), ifb != nil, redirect, c.root, c.download, c.download, sh(t, "tc", "-n", ns, "qdisc", "show"))
			}
		}
		apply(t, b, shape.State{})
		assertNothingOwned(t, b)
	})
}
