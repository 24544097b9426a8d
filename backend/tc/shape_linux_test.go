// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/macake/macake/execrun"
)

// Every kernel test runs once per shaper the backend can choose on the
// kernel it runs on: htb + bfifo wherever there is htb (the host), CAKE
// where there is sch_cake (a cakevm guest: `make test-cake`). The tests
// assert what the user cares about (the rate in force, the queue, the
// exemptions, what is macake's) through liveShaperOf, which reads the
// shape the backend chose, never a class id of one shape.

var shapesFlag = flag.String("tc.shapes", "", "the shapers the kernel tests run on, comma-separated: htb, cake (default: every one this kernel has)")

// kernelShape is one shaper the backend can choose.
type kernelShape struct {
	name string // "htb" or "cake"
	cake bool
}

var (
	probeMu     sync.Mutex
	probedCaps  *Capabilities
	everyShape  = []kernelShape{{"htb", false}, {"cake", true}}
	shapeByName = map[string]kernelShape{"htb": everyShape[0], "cake": everyShape[1]}
)

// kernelCaps probes the kernel once for the whole test binary.
func kernelCaps(t *testing.T) Capabilities {
	t.Helper()
	probeMu.Lock()
	defer probeMu.Unlock()
	if probedCaps == nil {
		c := Probe(context.Background(), execrun.Exec{}, DefaultTools())
		if !c.Tried {
			t.Fatalf("the capability probe could not try the kernel's features: %+v", c)
		}
		probedCaps = &c
	}
	return *probedCaps
}

// forEachShape runs fn as a subtest per shaper this kernel has (and
// -tc.shapes keeps). A kernel without sch_cake skips the CAKE subtest
// and says where it runs.
func forEachShape(t *testing.T, fn func(t *testing.T, ks kernelShape)) {
	t.Helper()
	requireRoot(t)
	caps := kernelCaps(t)
	var want []string
	if *shapesFlag != "" {
		want = strings.Split(*shapesFlag, ",")
		for _, w := range want {
			if _, ok := shapeByName[w]; !ok {
				t.Fatalf("-tc.shapes: unknown shape %q (htb, cake)", w)
			}
		}
	}
	for _, ks := range everyShape {
		if want != nil && !slices.Contains(want, ks.name) {
			continue
		}
		t.Run(ks.name, func(t *testing.T) {
			if ks.cake && !caps.ShapesWithCake() {
				t.Skip("skipping: this kernel has no sch_cake (or no sch_prio); `make test-cake` runs these tests on a real one in a QEMU guest")
			}
			fn(t, ks)
		})
	}
}

// backend returns a backend acting in ns that shapes with ks.
func (ks kernelShape) backend(t *testing.T, ns string, r execrun.Runner) *Backend {
	t.Helper()
	b := &Backend{Runner: r, Tools: DefaultTools()}
	b.Tools.Netns = ns
	c := kernelCaps(t)
	c.Cake = c.Cake && ks.cake
	b.SetCapabilities(c)
	return b
}

// netlinkBackend is backend reading the live state and writing rates over
// netlink, as `macake apply` and `watch` do (unless MACAKE_NETLINK=off):
// a plan then starts no process to observe.
func (ks kernelShape) netlinkBackend(t *testing.T, ns string, r execrun.Runner) *Backend {
	t.Helper()
	b := ks.backend(t, ns, r)
	nl := NewNetlink(ns)
	b.Netlink = nl
	t.Cleanup(func() { nl.Close() })
	return b
}

// onWan0 makes a namespace with the device wan0 (kernelNetns) and opens
// a backend of ks in it with open (ks.backend or ks.netlinkBackend),
// running real commands.
func (ks kernelShape) onWan0(t *testing.T, open func(*testing.T, string, execrun.Runner) *Backend) (string, *Backend) {
	t.Helper()
	ns := kernelNetns(t, "wan0")
	return ns, open(t, ns, execrun.Exec{})
}

// liveShaper is one direction's shaper as the user sees it, read back
// from the kernel whatever its shape.
type liveShaper struct {
	// kind is "cake" or "htb+bfifo" (liveKind), or what else is there.
	kind string
	// rateBits is the rate in force; exact tells whether it was read to
	// the byte (JSON, netlink) or from tc's rounded text.
	rateBits int64
	exact    bool
	// queueBytes is the bfifo's limit; 0 with CAKE, which sizes its own.
	queueBytes int64
	// cake holds CAKE's options.
	cake *CakeOptions
}

// liveShaperOf reads the shaper on dev in b's namespace.
func liveShaperOf(t *testing.T, b *Backend, dev string) liveShaper {
	t.Helper()
	d := observe(t, b).Devices[dev]
	if d == nil {
		t.Fatalf("no device %s", dev)
	}
	s := liveShaper{kind: liveKind(d)}
	switch s.kind {
	case "cake":
		leaf := d.cakeLeaf()
		s.cake, s.exact = leaf.Cake, true
		if leaf.Cake != nil {
			s.rateBits = int64(leaf.Cake.BandwidthBytes) * 8
		}
	case "htb+bfifo":
		if c := d.Class(ClassHandle); c != nil {
			s.rateBits, s.exact = c.RateBits, c.Exact
		}
		if l := d.Leaf(ClassHandle); l != nil && l.Kind == "bfifo" {
			s.queueBytes = l.Limit
		}
	}
	return s
}

// ratesMatch reports whether the shaper runs at wantBits, as precisely as
// it was read.
func (s liveShaper) ratesMatch(wantBits int64) bool {
	return sameRate(wantBits, s.rateBits, s.exact)
}

func (s liveShaper) String() string {
	str := fmt.Sprintf("%s at %d bit/s", s.kind, s.rateBits)
	if s.kind == "htb+bfifo" {
		str += fmt.Sprintf(", queue %d B", s.queueBytes)
	}
	if s.cake != nil {
		str += fmt.Sprintf(", cake %+v", *s.cake)
	}
	return str
}

// assertShaper checks the kind, the rate and (htb) the queue of the
// shaper on dev.
func assertShaper(t *testing.T, b *Backend, ks kernelShape, dev string, rateBits, queueBytes int64) {
	t.Helper()
	s := liveShaperOf(t, b, dev)
	want := "htb+bfifo"
	if ks.cake {
		want, queueBytes = "cake", 0
	}
	if s.kind != want || !s.ratesMatch(rateBits) || s.queueBytes != queueBytes {
		t.Errorf("shaper on %s is %v, want %s at %d bit/s, queue %d B", dev, s, want, rateBits, queueBytes)
	}
}

// bypassed returns how many packets left dev through macake's exemption,
// unshaped: htb's direct queue, or prio's band 0 (what prio sent less what
// CAKE sent).
func bypassed(t *testing.T, b *Backend, ks kernelShape, dev string) int64 {
	t.Helper()
	if ks.cake {
		c := countersOf(t, b, dev)
		return int64(c.root - c.leaf)
	}
	out := sh(t, "tc", "-n", b.Tools.Netns, "-s", "-j", "qdisc", "show", "dev", dev, "root")
	v, err := parseJSONTree([]byte(out))
	if err != nil || v.kind != jArray || len(v.arr) != 1 || v.arr[0].getString("kind") != "htb" {
		t.Fatalf("no htb root on %s: %v\n%s", dev, err, out)
	}
	opts, _ := v.arr[0].get("options")
	n, _, _ := opts.getInt("direct_packets_stat")
	return n
}

// counters are how many packets macake's prio root and its CAKE leaf on
// a device have sent.
type counters struct{ root, leaf uint64 }

func countersOf(t *testing.T, b *Backend, dev string) counters {
	t.Helper()
	out := sh(t, "tc", "-n", b.Tools.Netns, "-s", "-j", "qdisc", "show", "dev", dev)
	qs, err := ParseQdiscs([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	d := &DeviceState{Qdiscs: qs}
	root, leaf := d.Root(), d.cakeLeaf()
	if root == nil || root.Handle != RootHandle || root.Stats == nil || leaf == nil || leaf.Stats == nil {
		t.Fatalf("no prio root and CAKE leaf with counters on %s:\n%s", dev, out)
	}
	return counters{root.Stats.Packets, leaf.Stats.Packets}
}

// sentThrough returns how many packets the shaper on dev sent (its root's
// count, which for CAKE includes what bypassed it).
func sentThrough(t *testing.T, b *Backend, dev string) int64 {
	t.Helper()
	out := sh(t, "tc", "-n", b.Tools.Netns, "-s", "-j", "qdisc", "show", "dev", dev, "root")
	qs, err := ParseQdiscs([]byte(out))
	if err != nil || len(qs) == 0 || qs[0].Stats == nil {
		t.Fatalf("reading qdisc statistics of %s: %v %q", dev, err, out)
	}
	return int64(qs[0].Stats.Packets)
}

// leafParentArg is where the shaper's leaf hangs in ks.
func (ks kernelShape) leafParentArg() string {
	return shaperSpec{cake: ks.cake}.leafParent()
}
