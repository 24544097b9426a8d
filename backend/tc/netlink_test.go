// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/shape"
)

// The expected values are what iproute2 6.1's tc sent for the same
// commands, read from its netlink requests with strace (`tc class change
// dev d0 parent 4d4b: classid 4d4b:1 htb rate R ceil R burst B cburst B
// quantum 1514`, `tc qdisc change … cake …`): a netlink rate change must
// leave the kernel exactly as tc would, or every drift check would see a
// difference.
func TestHTBParamsMatchTC(t *testing.T) {
	// Ticks per microsecond from this kernel's /proc/net/psched.
	ticks, err := parsePsched("000003e8 00000040 000f4240 3b9aca00\n")
	if err != nil || ticks != 15.625 {
		t.Fatalf("parsePsched = %v, %v; want 15.625", ticks, err)
	}
	for _, c := range []struct {
		rate, overhead, mpu int64
		wantRate32          uint32
		wantBuffer          uint32
		rate64              bool
	}{
		{rate: 41_234_567, wantRate32: 5_154_320, wantBuffer: 15609},
		{rate: 41_234_567, overhead: 18, mpu: 64, wantRate32: 5_154_320, wantBuffer: 15609},
		{rate: 8_000_000, wantRate32: 1_000_000, wantBuffer: 25000},
		{rate: 1_000_000_000, wantRate32: 125_000_000, wantBuffer: 15625},
		{rate: 40_000_000_000, wantRate32: 0xffffffff, wantBuffer: 15625, rate64: true},
	} {
		s := shaperSpec{pipe: shape.Pipe{RateBits: c.rate}, overhead: int(c.overhead), mpu: int(c.mpu)}
		p := htbParamsFor(s, ticks)
		if p.Rate32() != c.wantRate32 || p.Buffer != c.wantBuffer || p.NeedsRate64() != c.rate64 ||
			p.Quantum != 1514 || p.Overhead != uint16(c.overhead) || p.MPU != uint16(c.mpu) || p.CellLog != 3 || p.CellAlign != 0xffff {
			t.Errorf("rate %d: %+v (rate32 %d), want rate32 %d buffer %d rate64 %v", c.rate, p, p.Rate32(), c.wantRate32, c.wantBuffer, c.rate64)
		}
	}
	// tc truncates the transmit time to whole microseconds before it
	// converts it to ticks: 1030.8 µs is 1030 µs, 16093 ticks, not 16106.
	if got := xmitTicks(5_000_000, 5154, ticks); got != 16093 {
		t.Errorf("xmitTicks(40 Mbit/s, 5154 B) = %d, want tc's 16093", got)
	}
}

func TestParsePschedRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "1 2", "zz 40 f4240", "3e8 0 f4240"} {
		if _, err := parsePsched(in); err == nil {
			t.Errorf("parsePsched(%q) succeeded", in)
		}
	}
	// A nanosecond clock (the 3rd word 1e9) makes ticks microseconds × 1.
	if v, err := parsePsched("000003e8 00000040 3b9aca00"); err != nil || v != 1000 {
		t.Errorf("nanosecond clock: %v, %v; want 1000", v, err)
	}
}

// The CAKE attributes are tc's for the same options: iproute2 6.1's
// requests for `tc qdisc change … cake …` (strace), where it sends
// diffserv only when not diffserv3, mpu only above 0, memlimit only when
// set, and rtt with the target it derives (a twentieth). A kernel test
// (TestKernelNetlinkSetRateMatchesTC) compares the kernel's own state
// after both.
func TestCakeParamsMatchTC(t *testing.T) {
	link := func(c *shape.Cake) shape.Link {
		return shape.Link{Name: "wan", Interface: "eth0", Upload: shape.Pipe{RateBits: 20_000_000}, Download: shape.Pipe{RateBits: 20_000_000}, Cake: c}
	}
	// … cake bandwidth 20000000bit diffserv3 triple-isolate nonat nowash split-gso no-ack-filter rtt 100ms raw noatm egress
	p, err := cakeParamsFor(specFor(link(nil), shape.Upload, true))
	if err != nil || p != (cakeParams{RateBytes: 2_500_000, FlowMode: 7, SplitGSO: 1, RTT: 100_000, Target: 5_000, Raw: true}) {
		t.Errorf("defaults, egress = %+v, %v", p, err)
	}
	// … diffserv4 dual-dsthost nat wash no-split-gso no-ack-filter rtt 50ms memlimit 1048576 overhead 18 mpu 64 ptm ingress
	p, err = cakeParamsFor(specFor(link(&shape.Cake{Diffserv: "diffserv4", IngressIsolate: "dual-dsthost", NAT: true, ACKFilter: true,
		Wash: true, NoSplitGSO: true, RTT: 50 * time.Millisecond, MemLimit: 1 << 20, LinkLayer: "ptm", Overhead: 18, MPU: 64}), shape.Download, true))
	want := cakeParams{RateBytes: 2_500_000, Diffserv: 1, SendDiffserv: true, FlowMode: 6, NAT: 1, Wash: 1, Ingress: 1, ATM: 2,
		RTT: 50_000, Target: 2_500, Memory: 1 << 20, Overhead: 18, MPU: 64}
	if err != nil || p != want {
		t.Errorf("every option, ingress = %+v, %v\nwant %+v", p, err, want)
	}
	// A tiny rtt still has a target of at least 1 µs, as tc makes it.
	if p, _ := cakeParamsFor(specFor(link(&shape.Cake{RTT: 10 * time.Microsecond}), shape.Upload, true)); p.Target != 1 || p.RTT != 10 {
		t.Errorf("rtt 10us: rtt %d target %d, want 10 and 1", p.RTT, p.Target)
	}
	for _, bad := range []shaperSpec{{cake: true, diffserv: "diffserv5", flowmode: "flows", linkLayer: "noatm"},
		{cake: true, diffserv: "diffserv3", flowmode: "per-host", linkLayer: "noatm"}, {cake: true, diffserv: "diffserv3", flowmode: "flows", linkLayer: "adsl"}} {
		if _, err := cakeParamsFor(bad); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
}

// Every mode a policy may name has a kernel value.
func TestCakeParamsCoverEveryPolicyMode(t *testing.T) {
	for _, d := range config.Diffservs {
		for _, i := range config.Isolations {
			for _, l := range config.LinkLayers {
				c := &shape.Cake{Diffserv: string(d), EgressIsolate: string(i), IngressIsolate: string(i)}
				if l != config.LinkLayerNone {
					c.LinkLayer = string(l)
				}
				for _, dir := range shape.Directions {
					if _, err := cakeParamsFor(specFor(shape.Link{Cake: c}, dir, true)); err != nil {
						t.Errorf("%s %s %s: %v", d, i, l, err)
					}
				}
			}
		}
	}
}
