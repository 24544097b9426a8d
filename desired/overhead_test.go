// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"strings"
	"testing"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// TestDesiredCountsOverheadOnce: a policy's overhead and mpu are counted
// exactly once whichever backend shapes. dummynet counts packet bytes, so
// the pipe rate is lowered (PipeRate); tc's htb and cake count the
// overhead themselves, so they get the policy's wire rate unchanged and
// the overhead in shape.Link.Cake. Lowering the rate and also telling the
// kernel would shape about 1.2 % (DOCSIS) to 3 % (PPPoE over VDSL) below
// what the user asked for.
func TestDesiredCountsOverheadOnce(t *testing.T) {
	l := configtest.Parse(t, "cable", configtest.Policy{Interface: "eth0", Mode: "fixed", Download: "450mbit", Upload: "22mbit",
		More: "queue = \"256KB\"\noverhead = 18\nmpu = 64\n"}.TOML())
	mtu := map[string]int{"eth0": 1500}
	for _, tt := range []struct {
		name           string
		kernelOverhead bool
		upload         int64
	}{
		{"dummynet", false, 21_739_000}, // 22000 kbit/s × 1500/1518
		{"tc", true, 22_000_000},
	} {
		d, err := Desired([]config.Link{l}, up("eth0"), Inputs{MTU: mtu}, BackendFacts{KernelOverhead: tt.kernelOverhead})
		if err != nil {
			t.Fatal(err)
		}
		got := d.State.Links[0]
		if got.Upload.RateBits != tt.upload {
			t.Errorf("%s: upload %d bit/s, want %d", tt.name, got.Upload.RateBits, tt.upload)
		}
		if got.Cake == nil || got.Cake.Overhead != 18 || got.Cake.MPU != 64 {
			t.Errorf("%s: cake options %+v, want overhead 18 mpu 64", tt.name, got.Cake)
		}
	}

	// Composed with the tc backend's planner on a kernel without CAKE: the
	// htb class runs at the wire rate and adds the overhead per packet.
	d, err := Desired([]config.Link{l}, up("eth0"), Inputs{MTU: mtu}, BackendFacts{KernelOverhead: true})
	if err != nil {
		t.Fatal(err)
	}
	live := tc.Live{
		Tools: tc.Tools{TC: "tc", IP: "ip"},
		Caps:  tc.Capabilities{HTB: true, BFIFO: true, Ingress: true, U32: true, Mirred: true, IFB: true},
		Devices: map[string]*tc.DeviceState{"eth0": {
			Device: tc.Device{Name: "eth0", Index: 2, Up: true},
			Qdiscs: []tc.Qdisc{{Dev: "eth0", Kind: "noqueue", Root: true}},
		}},
	}
	p := tc.Diff(d.State, live)
	class := findCommand(p, "class replace dev eth0 ")
	if !strings.Contains(class, " rate 22000000bit ") || !strings.HasSuffix(class, " overhead 18 mpu 64") {
		t.Errorf("upload htb class: %q, want the wire rate 22000000bit with overhead 18 mpu 64", class)
	}
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, "sch_cake") {
			t.Errorf("overhead and mpu alone need no CAKE, yet: %s", w.Message)
		}
	}
}

// findCommand returns the first command of p (argv joined by spaces, or a
// line of a batch's stdin) that starts with prefix after the program name.
func findCommand(p plan.Plan, prefix string) string {
	for _, op := range p.Ops {
		for _, c := range op.Commands {
			if len(c.Argv) > 1 {
				if s := strings.Join(c.Argv[1:], " "); strings.HasPrefix(s, prefix) {
					return s
				}
			}
			for _, line := range strings.Split(c.Stdin, "\n") {
				if strings.HasPrefix(line, prefix) {
					return line
				}
			}
		}
	}
	return ""
}

// TestDesiredCakeOnTC maps the [cake] table onto shape.Cake in full, and a
// kernel with CAKE gets every option: isolation per direction, nat on both,
// ack-filter on upload only, overhead and mpu, at the wire rate.
func TestDesiredCakeOnTC(t *testing.T) {
	l := configtest.Parse(t, "router", configtest.Policy{Interface: "eth0", Mode: "fixed", Download: "90mbit", Upload: "18mbit"}.TOML()+`overhead = 44
mpu = 84
[cake]
diffserv = "diffserv4"
egress_isolation = "dual-srchost"
ingress_isolation = "dual-dsthost"
nat = true
ack_filter = true
`)
	d, err := Desired([]config.Link{l}, up("eth0"), Inputs{}, BackendFacts{KernelOverhead: true})
	if err != nil {
		t.Fatal(err)
	}
	want := shape.Cake{Diffserv: "diffserv4", EgressIsolate: "dual-srchost", IngressIsolate: "dual-dsthost", NAT: true, ACKFilter: true, Overhead: 44, MPU: 84}
	if got := d.State.Links[0].Cake; got == nil || *got != want {
		t.Fatalf("cake %+v, want %+v", got, want)
	}
	live := tc.Live{
		Tools: tc.Tools{TC: "tc", IP: "ip"},
		Caps:  tc.Capabilities{Cake: true, Prio: true, HTB: true, BFIFO: true, Ingress: true, U32: true, Mirred: true, IFB: true},
		Devices: map[string]*tc.DeviceState{"eth0": {
			Device: tc.Device{Name: "eth0", Index: 2, Up: true},
			Qdiscs: []tc.Qdisc{{Dev: "eth0", Kind: "noqueue", Root: true}},
		}},
	}
	p := tc.Diff(d.State, live)
	for prefix, wantArgs := range map[string]string{
		"qdisc replace dev eth0 parent 4d4b:2 ":        "cake bandwidth 18000000bit diffserv4 dual-srchost nat nowash split-gso ack-filter rtt 100ms overhead 44 mpu 84 noatm egress",
		"qdisc replace dev ifb-macake0 parent 4d4b:2 ": "cake bandwidth 90000000bit diffserv4 dual-dsthost nat nowash split-gso no-ack-filter rtt 100ms overhead 44 mpu 84 noatm ingress",
	} {
		if got := findCommand(p, prefix); !strings.HasSuffix(got, wantArgs) {
			t.Errorf("%s…: %q, want it to end %q", prefix, got, wantArgs)
		}
	}
	if len(p.Warnings) != 0 {
		t.Errorf("warnings on a kernel with CAKE: %v", p.Warnings)
	}
}
