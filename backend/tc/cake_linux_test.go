// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// cakeReadBack is what tc -j shows of one CAKE leaf (bandwidth in bytes/s,
// rtt in µs), written out by hand per case: the table's oracle.
type cakeReadBack struct {
	diffserv, upIsolation, downIsolation string
	nat, wash, ackFilter                 bool
	noSplitGSO                           bool
	rttMicros                            uint32
	memlimit                             int64
	atm                                  string // as tc prints it: "" for raw without cells
	raw                                  bool
	overhead, mpu                        int
}

// options returns what the upload (egress) or download (ingress) leaf
// shows at rateBits.
func (r cakeReadBack) options(dir shape.Direction, rateBits int64) CakeOptions {
	c := CakeOptions{BandwidthBytes: uint64(rateBits / 8), Diffserv: r.diffserv, FlowMode: r.upIsolation, ACKFilter: "disabled",
		NAT: r.nat, Wash: r.wash, SplitGSO: !r.noSplitGSO, RTTMicros: r.rttMicros, MemLimit: r.memlimit, ATM: r.atm,
		Raw: r.raw, Overhead: r.overhead, MPU: r.mpu}
	if r.ackFilter && dir == shape.Upload {
		c.ACKFilter = "enabled"
	}
	if dir == shape.Download {
		c.FlowMode, c.Ingress = r.downIsolation, true
	}
	return c
}

// Every [cake] option reaches the kernel and reads back, over netlink and
// with tc -j alike: each case is applied on top of the one before, so
// every change is made too, with the least disruptive operation: a change
// of the CAKE leaf in place where tc can express it (its queue and its
// counters stay), a new leaf where an option goes back to a default tc
// cannot name (diffserv3, mpu 0, an automatic memlimit), and never a new
// root (the probes' bypass and its counters stay). Then No changes.
func TestKernelCakeOptionsReachTheKernel(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		if !ks.cake {
			t.Skip("skipping: the [cake] options are CAKE's; htb+bfifo applies overhead and mpu only (TestKernelApplyConvergesSetRateAndTeardown)")
		}
		client, _ := quietLink(t)
		b := ks.backend(t, client.Name(), execrun.Exec{})
		b.Netlink = NewNetlink(client.Name())
		defer b.Netlink.Close()
		viaTC := ks.backend(t, client.Name(), execrun.Exec{})
		pinger := newPinger(t, client)
		defaults := cakeReadBack{diffserv: "diffserv3", upIsolation: "triple-isolate", downIsolation: "triple-isolate", rttMicros: 100_000, raw: true}
		with := func(f func(*cakeReadBack)) cakeReadBack { r := defaults; f(&r); return r }
		dual := func(r *cakeReadBack) { r.upIsolation, r.downIsolation, r.nat = "dual-srchost", "dual-dsthost", true }
		noatm := func(r *cakeReadBack) { r.raw, r.atm = false, "noatm" }
		const change, rebuild = "change", "rebuild"
		for _, c := range []struct {
			name string
			cake *shape.Cake
			want cakeReadBack
			how  string // how the step before becomes this one
		}{
			{"defaults", nil, defaults, ""},
			{"isolation per direction, nat", &shape.Cake{EgressIsolate: "dual-srchost", IngressIsolate: "dual-dsthost", NAT: true}, with(dual), change},
			{"diffserv4", &shape.Cake{Diffserv: "diffserv4", EgressIsolate: "dual-srchost", IngressIsolate: "dual-dsthost", NAT: true},
				with(func(r *cakeReadBack) { dual(r); r.diffserv = "diffserv4" }), change},
			{"diffserv8", &shape.Cake{Diffserv: "diffserv8"}, with(func(r *cakeReadBack) { r.diffserv = "diffserv8" }), change},
			{"besteffort", &shape.Cake{Diffserv: "besteffort"}, with(func(r *cakeReadBack) { r.diffserv = "besteffort" }), change},
			{"precedence", &shape.Cake{Diffserv: "precedence"}, with(func(r *cakeReadBack) { r.diffserv = "precedence" }), change},
			{"diffserv3 again", nil, defaults, rebuild},
			// docsis, ethernet, pppoe-ptm and pppoe-vcmux as config
			// resolves them (config.Framings).
			{"docsis", &shape.Cake{Overhead: 18, MPU: 64}, with(func(r *cakeReadBack) { noatm(r); r.overhead, r.mpu = 18, 64 }), change},
			{"ethernet", &shape.Cake{Overhead: 38, MPU: 84}, with(func(r *cakeReadBack) { noatm(r); r.overhead, r.mpu = 38, 84 }), change},
			{"pppoe-ptm", &shape.Cake{Overhead: 30, LinkLayer: "ptm"}, with(func(r *cakeReadBack) { r.raw, r.atm, r.overhead = false, "ptm", 30 }), rebuild},
			{"pppoe-vcmux", &shape.Cake{Overhead: 32, LinkLayer: "atm"}, with(func(r *cakeReadBack) { r.raw, r.atm, r.overhead = false, "atm", 32 }), change},
			{"overhead and mpu", &shape.Cake{Overhead: 44, MPU: 84}, with(func(r *cakeReadBack) { noatm(r); r.overhead, r.mpu = 44, 84 }), change},
			{"raw with ATM cells", &shape.Cake{LinkLayer: "atm"}, with(func(r *cakeReadBack) { r.atm = "atm" }), rebuild},
			{"ack-filter and wash", &shape.Cake{ACKFilter: true, Wash: true}, with(func(r *cakeReadBack) { r.ackFilter, r.wash = true, true }), change},
			{"rtt", &shape.Cake{RTT: 50 * time.Millisecond}, with(func(r *cakeReadBack) { r.rttMicros = 50_000 }), change},
			{"rtt in µs", &shape.Cake{RTT: 2500 * time.Microsecond}, with(func(r *cakeReadBack) { r.rttMicros = 2500 }), change},
			{"memlimit", &shape.Cake{MemLimit: 4 << 20}, with(func(r *cakeReadBack) { r.memlimit = 4 << 20 }), change},
			{"memlimit automatic again", nil, defaults, rebuild},
			{"no split-gso", &shape.Cake{NoSplitGSO: true}, with(func(r *cakeReadBack) { r.noSplitGSO = true }), change},
			{"everything", richCake(), cakeReadBack{diffserv: "diffserv4", upIsolation: "dual-srchost", downIsolation: "dual-dsthost", nat: true,
				wash: true, ackFilter: true, noSplitGSO: true, rttMicros: 50_000, memlimit: 1 << 20, atm: "ptm", overhead: 18, mpu: 64}, change},
			{"defaults again", nil, defaults, rebuild},
		} {
			link := wanLink("wan0", 5)
			link.Cake = c.cake
			desired := shape.State{Links: []shape.Link{link}}
			var before counters
			if c.how != "" {
				pingPeer(t, pinger, 3)
				before = countersOf(t, b, "wan0")
			}
			p := apply(t, b, desired)
			if c.how != "" {
				checkLeastDisruptive(t, c.name, p, c.how)
				after := countersOf(t, b, "wan0")
				if c.how == change && after.leaf < before.leaf {
					t.Errorf("%s: the CAKE leaf's counter went from %d to %d: it was replaced, not changed", c.name, before.leaf, after.leaf)
				}
				if after.root < before.root {
					t.Errorf("%s: the root's counter went from %d to %d: the root was replaced", c.name, before.root, after.root)
				}
			}
			mustConverge(t, b, desired)
			for _, reader := range []struct {
				name string
				b    *Backend
			}{{"netlink", b}, {"tc -j", viaTC}} {
				live := observe(t, reader.b)
				for _, side := range []struct {
					dev string
					dir shape.Direction
				}{{"wan0", shape.Upload}, {"ifb-macake5", shape.Download}} {
					leaf := live.Devices[side.dev].cakeLeaf()
					want := c.want.options(side.dir, link.Pipe(side.dir).RateBits)
					if leaf == nil || leaf.Cake == nil || !reflect.DeepEqual(*leaf.Cake, want) {
						t.Errorf("%s: %s read back with %s:\n got %+v\nwant %+v", c.name, side.dir, reader.name, leaf, want)
					}
				}
			}
		}
	})
}

// checkLeastDisruptive checks that plan p changed the CAKE leaves the way
// how says: "change" is one `qdisc change` per leaf, "rebuild" a delete
// and an add of the leaf; the prio root is never touched.
func checkLeastDisruptive(t *testing.T, name string, p plan.Plan, how string) {
	t.Helper()
	for _, op := range p.Ops {
		var verbs []string
		for _, c := range op.Commands {
			a := strings.Join(c.Argv, " ")
			if strings.Contains(a, " root") {
				t.Errorf("%s: %s touches the root: %s", name, op.Label, a)
			}
			if i := strings.Index(a, "qdisc "); i >= 0 {
				verbs = append(verbs, strings.Fields(a[i:])[1])
			}
		}
		want := []string{"change"}
		if how == "rebuild" {
			want = []string{"del", "add"}
		}
		if op.Kind == KindShaper && !reflect.DeepEqual(verbs, want) {
			t.Errorf("%s: %s runs qdisc %v, want %v:\n%s", name, op.Label, verbs, want, formatPlan(plan.Plan{Ops: []plan.Op{op}}))
		}
	}
}

// pingPeer sends n echoes from the client of a quietLink to 10.77.0.3 (no
// reflector: through CAKE), so that the counters move.
func pingPeer(t *testing.T, p *pinger, n int) {
	t.Helper()
	for range n {
		if !p.ping("10.77.0.3") {
			t.Fatal("no echo reply through the shaper")
		}
	}
}

// A CAKE option the system refuses (here wash, to a tc that does not
// know it, as an old iproute2) is reported before anything changes, with
// the option, its key and the fix, and the shaping in force stays exactly
// as it was; `macake validate`'s check (CheckCake) names the key too. The
// real tc and kernel take every option.
func TestKernelRefusedCakeOptionKeepsTheShaping(t *testing.T) {
	forEachShape(t, func(t *testing.T, ks kernelShape) {
		if !ks.cake {
			t.Skip("skipping: CAKE options are tried where CAKE shapes")
		}
		fake, err := filepath.Abs("testdata/tools/tc-without-wash")
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("MACAKE_REAL_TC", toolPath("", "tc"))
		ns := kernelNetns(t, "wan0")
		inForce := wanLink("wan0", 1)
		inForce.Cake = richCake()
		inForce.Cake.Wash = false
		apply(t, ks.netlinkBackend(t, ns, execrun.Exec{}), shape.State{Links: []shape.Link{inForce}})
		before := kernelState(t, ns)
		b := ks.netlinkBackend(t, ns, execrun.Exec{})
		b.Tools.TC = fake

		wanted := inForce
		wanted.Cake = richCake()
		wanted.Upload.RateBits = 30_000_000
		p := apply(t, b, shape.State{Links: []shape.Link{wanted}})
		if len(p.Ops) != 0 {
			t.Errorf("the plan changes a link whose CAKE options are refused:\n%s", formatPlan(p))
		}
		for _, dir := range []string{"upload", "download"} {
			want := `CAKE's "wash" (cake.wash) refused: What is "wash"?; this iproute2 (tc) does not know it: upgrade iproute2, or change cake.wash; the ` + dir + ` shaper in force is left as it is`
			if !hasWarning(p, want) {
				t.Errorf("no warning %q:\n%s", want, formatPlan(p))
			}
		}
		if after := kernelState(t, ns); after != before {
			t.Errorf("the shaping in force changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		assertShaper(t, b, ks, "wan0", 20_000_000, 0)

		refusals, ok := CheckCake(context.Background(), execrun.Exec{}, b.Tools, wanted.Cake)
		if !ok || len(refusals) != 1 || refusals[0].Key != "cake.wash" || refusals[0].Option != "wash" {
			t.Errorf("CheckCake with a tc without wash = %+v, %v; want wash refused", refusals, ok)
		}
		refusals, ok = CheckCake(context.Background(), execrun.Exec{}, DefaultTools(), wanted.Cake)
		if !ok || len(refusals) != 0 {
			t.Errorf("CheckCake with the real tc = %+v, %v; want every option taken", refusals, ok)
		}
	})
}
