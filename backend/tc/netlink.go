// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The controller's hot path writes a rate over netlink (Netlink, Linux
// only) instead of starting `tc`. What it sends must be exactly what tc
// would send for the same command (setRateCommand), or the next read-back
// would show a difference and the drift check would "repair" every rate.
// This file works out those values without touching the kernel, so they
// are tested on any OS against requests recorded from tc itself
// (testdata/netlink).

// errNoDevice is matched by a netlink write to an interface that does not
// exist (IsNotFound); its text is tc's.
//
//lint:ignore ST1005 the text is tc's own, capital and all, so messages read alike either way
var errNoDevice = errors.New("Cannot find device")

// htbClassParams are the fields of struct tc_htb_opt (and the 64-bit
// rates) that `tc class change … htb rate R ceil R burst B cburst B
// quantum Q [overhead O] [mpu M]` sends.
type htbClassParams struct {
	// RateBytes is the rate (and ceil) in bytes per second; above
	// 2^32−1 the 32-bit field holds ^0 and Rate64 carries it.
	RateBytes uint64
	// Buffer is the burst as the time to send it, in scheduler ticks.
	Buffer   uint32
	Quantum  uint32
	Overhead uint16
	MPU      uint16
	// CellLog and CellAlign are what tc's rate-table code puts in the
	// ratespec (tc computes a table for an MTU of 1600 bytes; the kernel
	// ignores both for a link-layer-aware rate, but the fields are
	// copied back in dumps).
	CellLog   uint8
	CellAlign uint16
}

// htbParamsFor returns the class parameters of s for a kernel whose
// scheduler clock runs tickInUsec ticks per microsecond.
func htbParamsFor(s shaperSpec, tickInUsec float64) htbClassParams {
	rate := uint64(max(s.pipe.RateBits, 0)) / 8
	burst := htbBurst(s.pipe.RateBits)
	return htbClassParams{
		RateBytes: rate,
		Buffer:    xmitTicks(rate, burst, tickInUsec),
		Quantum:   htbQuantum,
		Overhead:  uint16(s.overhead),
		MPU:       uint16(s.mpu),
		CellLog:   3,
		CellAlign: 0xffff,
	}
}

// Rate32 is the rate as the 32-bit ratespec field holds it.
func (p htbClassParams) Rate32() uint32 {
	if p.RateBytes > 0xffffffff {
		return 0xffffffff
	}
	return uint32(p.RateBytes)
}

// NeedsRate64 reports whether the rate needs TCA_HTB_RATE64/CEIL64.
func (p htbClassParams) NeedsRate64() bool { return p.RateBytes > 0xffffffff }

// xmitTicks is tc_calc_xmittime: the time to send size bytes at rate
// bytes/s, truncated to whole microseconds first (tc converts through an
// unsigned int), then to ticks.
func xmitTicks(rateBytes uint64, size int64, tickInUsec float64) uint32 {
	if rateBytes == 0 {
		return 0
	}
	usec := uint32(1e6 * (float64(size) / float64(rateBytes)))
	return uint32(float64(usec) * tickInUsec)
}

// parsePsched reads /proc/net/psched as tc does: the first three hex
// words are t2us, us2t and the clock resolution; a nanosecond clock makes
// t2us equal us2t. It returns ticks per microsecond.
func parsePsched(text string) (float64, error) {
	f := strings.Fields(text)
	if len(f) < 3 {
		return 0, fmt.Errorf("/proc/net/psched: want at least 3 fields, got %q", strings.TrimSpace(text))
	}
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, 32)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("/proc/net/psched: field %d %q is not a positive hex number", i+1, f[i])
		}
		v[i] = n
	}
	t2us, us2t, res := v[0], v[1], v[2]
	if res == 1e9 {
		t2us = us2t
	}
	return float64(t2us) / float64(us2t) * (float64(res) / 1e6), nil
}

// cakeParams are the TCA_CAKE_* attributes `tc qdisc change … cake
// OPTIONS` sends for the options cakeArgs renders: iproute2 sends an
// attribute only for what the command names, and of those, diffserv only
// when it is not diffserv3, mpu only above 0 and memlimit only when set
// (which is why cakeNeedsRebuild exists). rtt comes with the target tc
// derives from it (a twentieth, at least 1 µs).
type cakeParams struct {
	RateBytes uint64
	// Diffserv is sent only when SendDiffserv.
	Diffserv     uint32
	SendDiffserv bool
	FlowMode     uint32
	NAT, Wash    uint32
	SplitGSO     uint32
	AckFilter    uint32
	Ingress      uint32
	ATM          uint32
	RTT, Target  uint32
	// Memory is sent when not 0.
	Memory uint32
	// Raw: tc sends RAW and an overhead of 0; otherwise Overhead, and MPU
	// when it is not 0.
	Raw      bool
	Overhead int32
	MPU      uint32
}

// The kernel's CAKE enums (include/uapi/linux/pkt_sched.h).
var (
	cakeDiffserv = map[string]uint32{"diffserv3": 0, "diffserv4": 1, "diffserv8": 2, "besteffort": 3, "precedence": 4}
	cakeFlowMode = map[string]uint32{
		"flowblind": 0, "srchost": 1, "dsthost": 2, "hosts": 3, "flows": 4,
		"dual-srchost": 5, "dual-dsthost": 6, "triple-isolate": 7,
	}
	cakeATM = map[string]uint32{"noatm": 0, "atm": 1, "ptm": 2}
)

// cakeParamsFor returns the CAKE attributes of s.
func cakeParamsFor(s shaperSpec) (cakeParams, error) {
	ds, ok := cakeDiffserv[s.diffserv]
	if !ok {
		return cakeParams{}, fmt.Errorf("unknown CAKE diffserv mode %q", s.diffserv)
	}
	fm, ok := cakeFlowMode[s.flowmode]
	if !ok {
		return cakeParams{}, fmt.Errorf("unknown CAKE isolation mode %q", s.flowmode)
	}
	atm, ok := cakeATM[s.linkLayer]
	if !ok {
		return cakeParams{}, fmt.Errorf("unknown CAKE link layer %q", s.linkLayer)
	}
	p := cakeParams{
		RateBytes: uint64(max(s.pipe.RateBits, 0)) / 8, Diffserv: ds, SendDiffserv: ds != 0, FlowMode: fm,
		NAT: b32(s.nat), Wash: b32(s.wash), SplitGSO: b32(s.splitGSO), AckFilter: b32(s.ackFilter), Ingress: b32(s.ing),
		ATM: atm, RTT: s.rttMicros, Target: max(s.rttMicros/20, 1), Memory: uint32(max(s.memlimit, 0)),
	}
	if s.overhead == 0 && s.mpu == 0 {
		p.Raw = true
	} else {
		p.Overhead, p.MPU = int32(s.overhead), uint32(s.mpu)
	}
	return p, nil
}

func b32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
