// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"testing"

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

func TestCakeParamsMatchTC(t *testing.T) {
	// tc qdisc change … cake bandwidth 20000000bit diffserv3 triple-isolate nonat no-ack-filter raw egress
	raw := shaperSpec{cake: true, pipe: shape.Pipe{RateBits: 20_000_000}, diffserv: "diffserv3", flowmode: "triple-isolate"}
	p, err := cakeParamsFor(raw)
	if err != nil || p != (cakeParams{RateBytes: 2_500_000, Diffserv: 0, FlowMode: 7, Raw: true}) {
		t.Errorf("raw egress = %+v, %v", p, err)
	}
	// … diffserv4 dual-dsthost nat ack-filter overhead 18 mpu 64 ingress
	full := shaperSpec{cake: true, pipe: shape.Pipe{RateBits: 20_000_000}, diffserv: "diffserv4", flowmode: "dual-dsthost",
		nat: true, ackFilter: true, ing: true, overhead: 18, mpu: 64}
	p, err = cakeParamsFor(full)
	if err != nil || p != (cakeParams{RateBytes: 2_500_000, Diffserv: 1, FlowMode: 6, NAT: 1, AckFilter: 1, Ingress: 1, Overhead: 18, MPU: 64}) {
		t.Errorf("full = %+v, %v", p, err)
	}
	if _, err := cakeParamsFor(shaperSpec{cake: true, diffserv: "diffserv5", flowmode: "flows"}); err == nil {
		t.Error("an unknown diffserv mode was accepted")
	}
}

// Every mode a policy may name has a kernel value.
func TestCakeParamsCoverEveryPolicyMode(t *testing.T) {
	for _, d := range config.Diffservs {
		for _, i := range config.Isolations {
			if _, err := cakeParamsFor(shaperSpec{cake: true, diffserv: string(d), flowmode: string(i)}); err != nil {
				t.Errorf("%s %s: %v", d, i, err)
			}
		}
	}
}
