// SPDX-License-Identifier: Apache-2.0

// Package tccheck is `macake selftest` on Linux: it drives the tc backend
// through the real tc and ip, in a scratch network namespace of its own
// whose veth reaches a second, peer namespace, and compares what the
// kernel then reports, read with the backend's own parsers, with what the
// backend meant: the capabilities it would assume without root, a plan
// that applies and re-plans to nothing, the rates it set, drift it must
// repair, the rate and queueing delay real TCP gets through the shaper,
// another tool's qdisc it must not touch, and a teardown that leaves
// nothing.
//
// The namespaces are recorded before they exist and deleted at the end, so
// nothing outside them is ever touched; a SIGKILL leaves only the
// namespaces, which the next selftest or `macake down` deletes.
package tccheck

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/selftest/loopback"
	"github.com/macake/macake/selftest/scratch"
	"github.com/macake/macake/shape"
)

// ScratchNetns is the selftest's network namespace, where the backend
// acts; Peer(ns) holds the far end of the link, the measurement's server.
// A scratch record that names a namespace stands for its peer too.
const ScratchNetns = "macake-selftest"

// Peer is the name of ns's peer namespace.
func Peer(ns string) string { return ns + "-peer" }

// ours reports whether a recorded namespace is one a selftest makes:
// ScratchNetns, or a name of a test's own that begins with it.
func ours(ns string) bool { return ns == ScratchNetns || strings.HasPrefix(ns, ScratchNetns+"-") }

// The devices: the link's interface and its veth peer (in the peer),
// with addresses from the benchmarking range (RFC 2544) that exist only
// in the two namespaces; and a second veth pair whose one end carries
// another tool's qdisc.
const (
	linkDev    = "mst0"
	farDev     = "mst1"
	foreignDev = "mst2"
	foreignEnd = "mst3"
	linkAddr   = "198.18.0.1"
	farAddr    = "198.18.0.2"
)

// foreignQdisc is "another tool's" root qdisc on foreignDev.
var foreignQdisc = []string{"root", "handle", "8001:", "pfifo", "limit", "77"}

// Options configure the tc suite.
type Options struct {
	// Runner runs tc and ip (execrun.Exec).
	Runner execrun.Runner
	// Tools are the programs; Netns is set to the scratch namespace.
	Tools tc.Tools
	// Ledger records the namespace before it exists.
	Ledger *scratch.Ledger
	// SkipMeasure skips the shaping measurement (--quick).
	SkipMeasure bool
	// Measure tunes the measurement (zero: loopback's defaults).
	Measure loopback.Config
	// Netns names the scratch namespace: "" is ScratchNetns; tests give
	// one of their own (starting with ScratchNetns) so that runs on one
	// machine do not meet.
	Netns string
}

// Suite is one tc selftest.
type Suite struct {
	opts    Options
	tools   tc.Tools
	b       *tc.Backend
	desired shape.State
	setup   []string
	// ns and peer are the two namespaces.
	ns, peer string
	// offloads says why the veth's offloads stayed on ("" when off).
	offloads string
}

// New creates the scratch namespace (recorded first), its peer, the veth
// pairs and the backend that acts in the scratch namespace. It refuses
// when either namespace already exists.
func New(ctx context.Context, o Options) (*Suite, error) {
	if o.Runner == nil || o.Ledger == nil {
		return nil, errors.New("tccheck: New needs a runner and a ledger")
	}
	s := &Suite{opts: o, tools: o.Tools, ns: o.Netns}
	if s.ns == "" {
		s.ns = ScratchNetns
	}
	if !ours(s.ns) {
		return nil, fmt.Errorf("tccheck: namespace %q does not begin with %q", s.ns, ScratchNetns)
	}
	s.peer = Peer(s.ns)
	s.tools.Netns = s.ns
	// Leftovers in this state directory are gone by now: a namespace that
	// exists is another selftest's, and must not be recorded as ours.
	existing, err := namespaces(ctx, o.Runner, o.Tools)
	if err != nil {
		return nil, err
	}
	for _, ns := range []string{s.ns, s.peer} {
		if slices.Contains(existing, ns) {
			return nil, fmt.Errorf("network namespace %s exists: another macake selftest is running on this machine, or one killed while using another --state-dir left it (then: ip netns del %s)", ns, ns)
		}
	}
	if err := o.Ledger.SetNetns(s.ns); err != nil {
		return nil, err
	}
	ipn := func(ns string, args ...string) []string { return append([]string{o.Tools.IP, "-n", ns}, args...) }
	for _, argv := range [][]string{
		{o.Tools.IP, "netns", "add", s.ns},
		{o.Tools.IP, "netns", "add", s.peer},
		ipn(s.ns, "link", "set", "dev", "lo", "up"),
		ipn(s.peer, "link", "set", "dev", "lo", "up"),
		ipn(s.ns, "link", "add", "name", linkDev, "type", "veth", "peer", "name", farDev, "netns", s.peer),
		ipn(s.ns, "address", "add", linkAddr+"/24", "dev", linkDev),
		ipn(s.peer, "address", "add", farAddr+"/24", "dev", farDev),
		ipn(s.ns, "link", "set", "dev", linkDev, "up"),
		ipn(s.peer, "link", "set", "dev", farDev, "up"),
		ipn(s.ns, "link", "add", "name", foreignDev, "type", "veth", "peer", "name", foreignEnd),
		ipn(s.ns, "link", "set", "dev", foreignDev, "up"),
		ipn(s.ns, "link", "set", "dev", foreignEnd, "up"),
		append([]string{o.Tools.TC, "-n", s.ns, "qdisc", "add", "dev", foreignDev}, foreignQdisc...),
	} {
		if _, err := run(ctx, o.Runner, argv...); err != nil {
			return nil, fmt.Errorf("preparing the scratch namespaces: %w", err)
		}
	}
	s.setup = append(s.setup, fmt.Sprintf("created network namespaces %s and %s, joined by veth pair %s–%s (%s, %s); a pfifo on %s plays another tool's qdisc",
		s.ns, s.peer, linkDev, farDev, linkAddr, farAddr, foreignDev))
	// Segmentation offloads would hand the shaper 64 KB super-packets
	// (DESIGN §6); ethtool is optional, so without it they stay on.
	for _, end := range [][2]string{{s.ns, linkDev}, {s.peer, farDev}} {
		if _, err := run(ctx, o.Runner, o.Tools.IP, "netns", "exec", end[0], "ethtool", "-K", end[1], "tso", "off", "gso", "off", "gro", "off"); err != nil {
			why, _, _ := strings.Cut(err.Error(), "\n")
			s.offloads = "offloads left on (ethtool -K failed: " + why + ")"
			break
		}
	}
	if s.offloads != "" {
		s.setup = append(s.setup, s.offloads)
	}
	s.b = &tc.Backend{Runner: o.Runner, Tools: s.tools}
	s.desired = shape.State{Links: []shape.Link{{
		Name: "selftest", Interface: linkDev, Slot: 0,
		// The upload is the measured shaper: the pipe lo0.shaping gives
		// a Mac (20 Mbit/s, 256 KB, Q/R = 105 ms), large against the
		// noise of a busy machine.
		Upload:     shape.Pipe{RateBits: 20_000_000, QueueBytes: 256 << 10},
		Download:   shape.Pipe{RateBits: 50_000_000, QueueBytes: 128 << 10},
		Reflectors: shape.ICMPReflectors([]netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}),
	}}}
	return s, nil
}

func run(ctx context.Context, r execrun.Runner, argv ...string) (execrun.Result, error) {
	cmd := execrun.Command{Argv: argv}
	res, err := r.Run(ctx, cmd)
	return execrun.Check(cmd, res, err)
}

// Setup says what New did.
func (s *Suite) Setup() []string { return s.setup }

// Describe names the two sides.
func (s *Suite) Describe() (real, expected string) {
	return fmt.Sprintf("%s and %s in network namespace %s", s.opts.Tools.TC, s.opts.Tools.IP, s.ns),
		"the tc backend's own model: what it rendered, read back with its parsers"
}

// Real and Expected are the sides; the tc checks are probes, which need
// none, so both are placeholders that run nothing.
func (s *Suite) Real() *check.Side     { return &check.Side{Name: "real", Real: true} }
func (s *Suite) Expected() *check.Side { return &check.Side{Name: "model"} }

// Close deletes the scratch namespaces, and everything in them.
func (s *Suite) Close(ctx context.Context) ([]string, []error) {
	return RemoveScratch(ctx, s.opts.Runner, s.opts.Tools, s.opts.Ledger.Record())
}

// RemoveScratch deletes the namespaces rec names (one and its Peer),
// those that still exist.
func RemoveScratch(ctx context.Context, r execrun.Runner, t tc.Tools, rec scratch.Record) (done []string, errs []error) {
	switch {
	case rec.Netns == "":
		return nil, nil
	case !ours(rec.Netns):
		return nil, []error{fmt.Errorf("the scratch record names network namespace %q, not one of the selftest's (%s…); left alone", rec.Netns, ScratchNetns)}
	}
	existing, err := namespaces(ctx, r, t)
	if err != nil {
		return nil, []error{err}
	}
	for _, ns := range []string{rec.Netns, Peer(rec.Netns)} {
		if !slices.Contains(existing, ns) {
			continue
		}
		if _, err := run(ctx, r, t.IP, "netns", "del", ns); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, "deleted network namespace "+ns)
	}
	return done, errs
}

// namespaces lists the network namespaces `ip netns` knows.
func namespaces(ctx context.Context, r execrun.Runner, t tc.Tools) ([]string, error) {
	res, err := run(ctx, r, t.IP, "netns", "list")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out, nil
}

// Checks returns the tc checks, in order: each builds on the state the one
// before left.
func (s *Suite) Checks() []check.Check {
	return []check.Check{
		{ID: "tc.capabilities", Ref: "LINUX.md: What the kernel needs", Probe: s.probeCaps,
			Fact: "the features found by trying them in a throwaway namespace match the kernel configuration read without root"},
		{ID: "tc.apply", Ref: "LINUX.md: What a link becomes", Probe: s.probeApply,
			Fact: "the backend's first plan for a link applies: every tc and ip command succeeds"},
		{ID: "tc.converged", Ref: "LINUX.md: The objects macake owns", Needs: []string{"tc.apply"}, Probe: s.probeConverged,
			Fact: "a re-plan right after the apply is empty: the parsers read back what the renderer wrote"},
		{ID: "tc.readback", Ref: "LINUX.md: Reading it with tc", Needs: []string{"tc.apply"}, Probe: s.probeReadback,
			Fact: "the live shapers carry the rates and queues the backend set"},
		{ID: "tc.setrate", Ref: "LINUX.md: Rate changes", Needs: []string{"tc.converged"}, Probe: s.probeSetRate,
			Fact: "SetRate changes one direction's rate with one command, and the re-plan for the new rate is empty"},
		{ID: "tc.drift", Ref: "LINUX.md: The objects macake owns", Needs: []string{"tc.converged"}, Probe: s.probeDrift,
			Fact: "a shaper changed behind the backend's back is one update in the plan, and repaired"},
		{ID: "tc.shaping", Ref: "MEASUREMENTS.md", Needs: []string{"tc.drift"},
			Skip: func() string {
				if s.opts.SkipMeasure {
					return "skipped on request (--quick)"
				}
				return ""
			},
			Probe: s.probeShaping,
			Fact:  "the upload shaper passes TCP at its rate and a full queue adds Q/R, as the simulator assumes"},
		{ID: "tc.teardown", Ref: "LINUX.md: The objects macake owns", Needs: []string{"tc.apply"}, Probe: s.probeTeardown,
			Fact: "teardown removes everything the backend made and leaves another tool's qdisc as it was"},
	}
}

func errorResult(err error) check.Result {
	return check.Result{Status: check.Error, Detail: err.Error()}
}

func (s *Suite) probeCaps(ctx context.Context) check.Result {
	tried := tc.Probe(ctx, s.opts.Runner, s.tools)
	if !tried.Tried {
		return check.Result{Status: check.Error, Detail: "could not try the features in a throwaway namespace: " + tried.Method}
	}
	cfg, ok := tc.ConfigCapabilities()
	if !ok {
		return check.Result{Status: check.Skipped, Detail: "no kernel configuration to compare with (/proc/config.gz, /boot/config-*): doctor without root would assume"}
	}
	var diffs []string
	for _, f := range []struct {
		name    string
		a, b    bool
		canLoad bool
	}{
		{"sch_cake", tried.Cake, cfg.Cake, true}, {"sch_htb", tried.HTB, cfg.HTB, true}, {"bfifo", tried.BFIFO, cfg.BFIFO, true},
		{"ingress", tried.Ingress, cfg.Ingress, true}, {"u32", tried.U32, cfg.U32, true}, {"mirred", tried.Mirred, cfg.Mirred, true},
		{"ifb", tried.IFB, cfg.IFB, true},
	} {
		if f.a != f.b {
			diffs = append(diffs, fmt.Sprintf("%s: tried %v, configured %v", f.name, f.a, f.b))
		}
	}
	r := check.Result{Status: check.OK, Real: "shaper " + tried.Shaper() + " (tried)", Expected: "shaper " + cfg.Shaper() + " (" + cfg.Method + ")"}
	if len(diffs) > 0 {
		r.Status, r.Detail = check.Differs, strings.Join(diffs, "; ")
	}
	return r
}

// applyPlan plans for desired and executes every op.
func (s *Suite) applyPlan(ctx context.Context, desired shape.State) (plan.Plan, error) {
	p, err := s.b.Plan(ctx, desired)
	if err != nil {
		return p, err
	}
	for _, op := range p.Ops {
		if err := s.b.Execute(ctx, op); err != nil {
			return p, err
		}
	}
	return p, nil
}

func (s *Suite) probeApply(ctx context.Context) check.Result {
	p, err := s.applyPlan(ctx, s.desired)
	if err != nil {
		return errorResult(err)
	}
	c, _, _ := p.Count()
	if c == 0 {
		return check.Result{Status: check.Differs, Detail: "the first plan creates nothing"}
	}
	return check.Result{Status: check.OK, Real: fmt.Sprintf("%d ops applied (%s shaper)", len(p.Ops), s.b.Capabilities(ctx).Shaper()), Expected: "every op applies"}
}

// replanEmpty requires an empty plan for desired.
func (s *Suite) replanEmpty(ctx context.Context, desired shape.State) check.Result {
	p, err := s.b.Plan(ctx, desired)
	if err != nil {
		return errorResult(err)
	}
	if !p.Empty() {
		return check.Result{Status: check.Differs, Detail: "the re-plan is not empty: " + opList(p), Real: fmt.Sprintf("%d ops", len(p.Ops)), Expected: "No changes."}
	}
	return check.Result{Status: check.OK}
}

func opList(p plan.Plan) string {
	var out []string
	for _, op := range p.Ops {
		out = append(out, fmt.Sprintf("%s %s (%s)", op.Action.Symbol(), op.Label, op.Reason))
	}
	return strings.Join(out, "; ")
}

func (s *Suite) probeConverged(ctx context.Context) check.Result {
	return s.replanEmpty(ctx, s.desired)
}

func (s *Suite) probeReadback(ctx context.Context) check.Result {
	shapers, err := s.b.LiveShapers(ctx)
	if err != nil {
		return errorResult(err)
	}
	cake := s.b.Capabilities(ctx).ShapesWithCake()
	var got, want []string
	for _, dir := range shape.Directions {
		p := s.desired.Links[0].Pipe(dir)
		q := p.QueueBytes
		if cake {
			q = 0 // cake sizes its own queue
		}
		want = append(want, fmt.Sprintf("%s %s %d B", dir, shape.FormatRate(p.RateBits), q))
		for _, sh := range shapers {
			if sh.Interface == linkDev && sh.Direction == dir.String() {
				got = append(got, fmt.Sprintf("%s %s %d B", dir, shape.FormatRate(sh.RateBits), sh.QueueBytes))
			}
		}
	}
	r := check.Result{Status: check.OK, Real: strings.Join(got, ", "), Expected: strings.Join(want, ", ")}
	if !slices.Equal(got, want) {
		r.Status, r.Detail = check.Differs, "the live shapers differ from what the backend set"
	}
	return r
}

// setRate sets direction d of the suite's link to bits through the
// backend's hot path (SetRate) and returns the pipe it set.
func (s *Suite) setRate(ctx context.Context, d shape.Direction, bits int64) (shape.Pipe, error) {
	l := s.desired.Links[0]
	p := l.Pipe(d)
	p.RateBits = bits
	return p, s.b.SetRate(ctx, l, d, p)
}

func (s *Suite) probeSetRate(ctx context.Context) check.Result {
	p, err := s.setRate(ctx, shape.Download, 30_000_000)
	if err != nil {
		return errorResult(err)
	}
	s.desired.Links[0].Download = p
	return s.replanEmpty(ctx, s.desired)
}

func (s *Suite) probeDrift(ctx context.Context) check.Result {
	// Another hand sets the upload shaper to 5 Mbit/s, as the backend's
	// own hot path would.
	if _, err := s.setRate(ctx, shape.Upload, 5_000_000); err != nil {
		return errorResult(err)
	}
	p, err := s.b.Plan(ctx, s.desired)
	if err != nil {
		return errorResult(err)
	}
	c, u, rm := p.Count()
	if c != 0 || u != 1 || rm != 0 {
		return check.Result{Status: check.Differs, Detail: "the plan for drifted upload: " + opList(p), Real: fmt.Sprintf("%d to create, %d to update, %d to remove", c, u, rm), Expected: "1 to update"}
	}
	if _, err := s.applyPlan(ctx, s.desired); err != nil {
		return errorResult(err)
	}
	return s.replanEmpty(ctx, s.desired)
}

func (s *Suite) probeTeardown(ctx context.Context) check.Result {
	if _, err := s.b.Teardown(ctx); err != nil {
		return errorResult(err)
	}
	live, err := s.b.Observe(ctx)
	if err != nil {
		return errorResult(err)
	}
	var left []string
	for name, dev := range live.Devices {
		if _, ifb := tc.IFBSlot(name); ifb {
			left = append(left, "device "+name)
		}
		if root := dev.Root(); root != nil && root.Handle == tc.RootHandle {
			left = append(left, "root qdisc on "+name)
		}
	}
	peer := live.Devices[foreignDev]
	var foreign string
	if root := peer.Root(); root != nil {
		foreign = fmt.Sprintf("%s %s", tc.FormatHandle(root.Handle), root.Kind)
	}
	slices.Sort(left)
	r := check.Result{Status: check.OK, Real: fmt.Sprintf("left: %q; %s root: %s", left, foreignDev, foreign), Expected: fmt.Sprintf("left: []; %s root: 8001: pfifo", foreignDev)}
	if len(left) > 0 || foreign != "8001: pfifo" {
		r.Status, r.Detail = check.Differs, "teardown left macake's objects or changed another tool's"
	}
	if p, err := s.b.Plan(ctx, shape.State{}); err == nil && !p.Empty() {
		r.Status, r.Detail = check.Differs, "a plan after teardown is not empty: "+opList(p)
	}
	return r
}
