// SPDX-License-Identifier: Apache-2.0

//go:build linux

package tc

import (
	"context"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

var record = flag.Bool("record", false, "re-record testdata/diff/htb-* from the real kernel (needs root)")

// recordingRunner passes commands to the real kernel and keeps what the
// read-only ones printed, keyed the way goldenTools would run them.
type recordingRunner struct {
	ns  string
	mu  sync.Mutex
	rec recording
}

func (r *recordingRunner) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	res, err := execrun.Exec{}.Run(ctx, cmd)
	argv := append([]string{filepath.Base(cmd.Argv[0])}, cmd.Argv[1:]...)
	if len(argv) > 2 && argv[1] == "-n" && argv[2] == r.ns {
		argv = append(argv[:1], argv[3:]...)
	}
	key := strings.Join(argv, " ")
	if err == nil && res.ExitCode == 0 && (strings.Contains(key, " show") || strings.HasSuffix(key, " show")) {
		r.mu.Lock()
		if _, seen := r.rec.outputs[key]; !seen {
			r.rec.order = append(r.rec.order, key)
		}
		r.rec.outputs[key] = string(res.Stdout)
		r.mu.Unlock()
	}
	return res, err
}

func (r *recordingRunner) reset(caps Capabilities) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec = recording{caps: caps, outputs: map[string]string{}}
}

func goldenDesired() shape.State {
	wan := wanLink("wan0", 3)
	lan := shape.Link{Name: "lan", Interface: "lan0", Slot: 4,
		Upload: shape.Pipe{RateBits: 5_000_000, QueueBytes: 20_000}, Download: shape.Pipe{RateBits: 8_000_000, QueueBytes: 30_000}}
	return shape.State{Links: []shape.Link{wan, lan}}
}

// TestRecordGoldenFromKernel rebuilds the recorded live states of the htb
// golden cases on the real kernel. It runs only with -record (as root):
// the golden tests themselves never need a kernel.
func TestRecordGoldenFromKernel(t *testing.T) {
	if !*record {
		t.Skip("skipping: pass -record to re-record the htb golden cases from the real kernel")
	}
	requireRoot(t)
	ns := kernelNetns(t, "wan0", "lan0")
	foreignNeighbours(t, ns)
	sh(t, "tc", "-n", ns, "qdisc", "add", "dev", "lan0", "root", "handle", "8002:", "pfifo", "limit", "77")
	b, save := recorder(t, ns, shapeByName["htb"])
	desired := goldenDesired()
	save("htb-fresh", desired)
	apply(t, b, desired)
	save("htb-converged", desired)
	save("htb-teardown", shape.State{})
	changed := goldenDesired()
	changed.Links[1].Reflectors = []shape.Reflector{shape.ICMPReflector(netip.MustParseAddr("10.0.0.1"))}
	changed.Links[1].Upload.QueueBytes = 40_000
	changed.Links[0].Reflectors = shape.ICMPReflectors([]netip.Addr{netip.MustParseAddr("fd77::2"), netip.MustParseAddr("10.77.0.9")})
	save("htb-policy-changed", changed)

	sh(t, "tc", "-n", ns, "class", "change", "dev", "wan0", "parent", "4d4b:", "classid", "4d4b:1", "htb", "rate", "5mbit", "overhead", "18")
	sh(t, "tc", "-n", ns, "qdisc", "change", "dev", "ifb-macake3", "parent", "4d4b:1", "handle", "4d4c:", "bfifo", "limit", "1000")
	save("htb-drift", desired)
	apply(t, b, desired)

	sh(t, "ip", "-n", ns, "link", "del", "dev", "ifb-macake3")
	save("htb-ifb-deleted", desired)
	apply(t, b, desired)

	// Someone replaces macake's root on wan0. With the ownership record
	// (macake created it) that is drift to restore; without one (a lost
	// state file, as if the pfifo had been there first) it is left alone;
	// with wan0 no longer wanted the record is dropped, the pfifo kept.
	sh(t, "tc", "-n", ns, "qdisc", "replace", "dev", "wan0", "root", "handle", "1:", "pfifo", "limit", "100")
	save("htb-root-replaced", desired, "wan0")
	save("htb-root-replaced-unrecorded", desired)
	save("htb-root-replaced-teardown", shape.State{}, "wan0")
	apply(t, b, desired)

	sh(t, "ip", "-n", ns, "link", "set", "dev", "wan0", "down")
	sh(t, "ip", "-n", ns, "link", "set", "dev", "wan0", "name", "wan9")
	save("htb-interface-renamed", desired)
}

// TestRecordReflectorKindGoldens records the cases of TCP and UDP
// reflectors: converged (their exemptions read back as what was applied:
// No changes) and a link whose reflectors change kind, as `auto` does once
// measure found that ICMP does not see the bloat. It runs only with
// -record (as root).
func TestRecordReflectorKindGoldens(t *testing.T) {
	if !*record {
		t.Skip("skipping: pass -record to re-record the golden cases from the real kernel")
	}
	requireRoot(t)
	ns := kernelNetns(t, "wan0")
	b, save := recorder(t, ns, shapeByName["htb"])
	icmp := shape.State{Links: []shape.Link{wanLink("wan0", 3)}}
	kinds := shape.State{Links: []shape.Link{wanLink("wan0", 3)}}
	kinds.Links[0].Reflectors = []shape.Reflector{
		{Kind: shape.ProbeTCP, Addr: netip.MustParseAddr("10.77.0.2"), Port: 443},
		{Kind: shape.ProbeTCP, Addr: netip.MustParseAddr("fd77::2"), Port: 443},
		{Kind: shape.ProbeUDP, Addr: netip.MustParseAddr("10.77.0.3"), Port: 7},
		shape.ICMPReflector(netip.MustParseAddr("10.77.0.4")),
	}
	apply(t, b, icmp)
	save("htb-reflector-kind-changed", kinds)
	apply(t, b, kinds)
	save("htb-reflector-kinds-converged", kinds)
}

// TestRecordCakeGoldensFromKernel records the cake-* golden cases on a
// kernel with sch_cake (a cakevm guest: `make record-cake`): the same
// namespace as the htb cases, with every CAKE option away from its default
// on wan and none on lan; then drift, options changed, options going back
// to defaults tc cannot name, and an older macake's layout (CAKE at the
// root). It runs only with -record (as root).
func TestRecordCakeGoldensFromKernel(t *testing.T) {
	if !*record {
		t.Skip("skipping: pass -record to re-record the cake golden cases from a kernel with sch_cake")
	}
	requireRoot(t)
	if !kernelCaps(t).ShapesWithCake() {
		t.Skip("skipping: this kernel has no sch_cake; run it in a guest: make record-cake")
	}
	ns := kernelNetns(t, "wan0", "lan0")
	foreignNeighbours(t, ns)
	b, save := recorder(t, ns, shapeByName["cake"])
	rich := goldenDesired()
	rich.Links[0].Cake = richCake()
	plain := goldenDesired()
	save("cake-fresh", rich)
	apply(t, b, rich)
	save("cake-converged", rich)
	save("cake-defaults-wanted", plain)
	save("cake-teardown", shape.State{})

	changed := goldenDesired()
	changed.Links[0].Cake = richCake()
	changed.Links[0].Cake.EgressIsolate = "triple-isolate"
	changed.Links[0].Cake.Wash = false
	changed.Links[0].Cake.RTT = 0
	save("cake-options-changed", changed)

	sh(t, "tc", "-n", ns, "qdisc", "change", "dev", "wan0", "parent", "4d4b:2", "handle", "4d4c:", "cake", "bandwidth", "8mbit", "besteffort", "triple-isolate")
	sh(t, "tc", "-n", ns, "filter", "del", "dev", "wan0", "parent", "4d4b:", "pref", "19786")
	sh(t, "tc", "-n", ns, "qdisc", "del", "dev", "ifb-macake3", "parent", "4d4b:2", "handle", "4d4c:")
	save("cake-drift", rich)
	apply(t, b, rich)

	apply(t, b, plain)
	save("cake-defaults-converged", plain)

	// An older macake's layout: CAKE itself at the root.
	apply(t, b, shape.State{})
	sh(t, "tc", "-n", ns, "qdisc", "add", "dev", "wan0", "root", "handle", "4d4b:", "cake", "bandwidth", "20mbit")
	save("cake-legacy-root", plain, "wan0")
}

// recorder returns a backend shaping with ks in ns whose readings are
// recorded, and save, which writes a golden case of them.
func recorder(t *testing.T, ns string, ks kernelShape) (*Backend, func(name string, d shape.State, owned ...string)) {
	t.Helper()
	rr := &recordingRunner{ns: ns}
	b := ks.backend(t, ns, rr)
	caps := b.Capabilities(context.Background())
	caps.Method = "recorded"
	b.SetCapabilities(caps)
	return b, func(name string, d shape.State, owned ...string) {
		t.Helper()
		saveCase(t, rr, b, caps, name, d, owned...)
	}
}

// recordDir is where the recordings go: testdata/diff, or
// $MACAKE_TC_RECORD_DIR (a cakevm guest writes to /xchg, since its view
// of the source tree vanishes with it).
func recordDir() string {
	if d := os.Getenv("MACAKE_TC_RECORD_DIR"); d != "" {
		return d
	}
	return filepath.Join("testdata", "diff")
}

// saveCase writes the golden case name: what observing the namespace
// prints now (live.txtar), the desired state d and, when given, the
// interfaces whose roots macake is recorded to own.
func saveCase(t *testing.T, rr *recordingRunner, b *Backend, caps Capabilities, name string, d shape.State, owned ...string) {
	t.Helper()
	rr.reset(caps)
	if _, err := Observe(context.Background(), rr, b.Tools); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(recordDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "live.txtar"), []byte(rr.rec.format()), 0o644); err != nil {
		t.Fatal(err)
	}
	js, _ := json.MarshalIndent(d, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "desired.json"), append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(owned) > 0 {
		js, _ = json.Marshal(owned)
		if err := os.WriteFile(filepath.Join(dir, "owned.json"), append(js, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (r recording) format() string {
	var b strings.Builder
	caps, _ := json.MarshalIndent(r.caps, "", "  ")
	b.WriteString("-- caps.json --\n")
	b.Write(caps)
	b.WriteString("\n")
	for _, k := range r.order {
		b.WriteString("-- " + k + " --\n")
		out := r.outputs[k]
		b.WriteString(out)
		if !strings.HasSuffix(out, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
