// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"math"
	"time"

	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
)

// params is Config converted once to the integer units of the control law
// (autorate.md §2.3): rates in kbit/s, times in µs, factors in thousandths,
// alphas in parts per million, the high-load threshold in percent. Every
// conversion rounds to nearest, as upstream does.
type params struct {
	dir [2]dirParams // indexed by shape.Direction

	window, votes int
	highLoadPct   int64
	activeK       int64 // connection active threshold, kbit/s
	stallK        int64 // connection stall threshold, kbit/s

	cutMin, cutMax, upMin, upMax, decay, recover int64 // thousandths

	bbRefractory, decayRefractory int64 // µs

	pingers      int
	pingInterval int64 // µs
	spacing      int64 // µs, pingInterval / pingers
	stallTimeout int64 // µs

	checkInterval, deadline          int64 // µs
	offenceWindow, offences          int
	replaceInterval, compareInterval int64 // µs
	sumExcess, ewmaExcess            int64 // µs

	alphaUp, alphaDown, alphaE int64 // ppm

	sleepAfter    int64 // µs
	globalTimeout int64 // µs
	stale         int64 // µs

	monitorNominal int64 // µs, as configured
	monitorFloored int64 // µs, max(nominal, 10 × (comp_dl + comp_ul)) at the base rates

	wirePacketBits int64         // P_bits: 8 · (MTU + overhead), ATM-framed; 0 when MTU = 0
	framing        shape.Framing // overhead, MPU and ATM, for the pipe-rate compensation
	compensate     bool          // framing.Compensates(): the pipe rate is below the wire rate

	engageAfter, releaseAfter int64 // µs

	achievedCut int64 // thousandths (Improvements.CutToAchieved)

	jitterScale, jitterFloor int64 // thousandths (Improvements.JitterThreshold)
}

type dirParams struct {
	minK, baseK, maxK, startK int64
	delay, up, down           int64 // configured thresholds, µs
	monitorOnly               bool
}

func newParams(c tuning.Config) params {
	p := params{
		window:          c.BufferbloatWindow,
		votes:           c.BufferbloatVotes,
		highLoadPct:     int64(math.Round(c.HighLoad * 100)),
		activeK:         shape.Kbit(c.ConnectionActive),
		stallK:          shape.Kbit(c.ConnectionStall),
		cutMin:          thousandths(c.MildestCut),
		cutMax:          thousandths(c.StrongestCut),
		upMin:           thousandths(c.SmallestIncrease),
		upMax:           thousandths(c.LargestIncrease),
		decay:           thousandths(c.DecayFactor),
		recover:         thousandths(c.RecoveryFactor),
		bbRefractory:    us(c.BufferbloatRefractory),
		decayRefractory: us(c.DecayRefractory),
		pingers:         c.Pingers,
		pingInterval:    us(c.PingInterval),
		checkInterval:   us(c.HealthCheckInterval),
		deadline:        us(c.ResponseDeadline),
		offenceWindow:   c.MisbehavingWindow,
		offences:        c.MisbehavingOffences,
		replaceInterval: us(c.ReplacementInterval),
		compareInterval: us(c.ComparisonInterval),
		sumExcess:       us(c.BaselineSumExcess),
		ewmaExcess:      us(c.DeltaEWMAExcess),
		alphaUp:         ppm(c.AlphaBaselineIncrease),
		alphaDown:       ppm(c.AlphaBaselineDecrease),
		alphaE:          ppm(c.AlphaDeltaEWMA),
		sleepAfter:      us(c.SleepAfter),
		globalTimeout:   us(c.GlobalPingTimeout),
		stale:           us(c.StaleResponseAge),
		monitorNominal:  us(c.MonitorInterval),
		framing:         shape.Framing{Overhead: int64(c.Overhead), MPU: int64(c.MPU), ATM: c.ATM},
		engageAfter:     us(c.EngageAfter),
		releaseAfter:    us(c.ReleaseAfter),
		achievedCut:     thousandths(c.AchievedCut),
		jitterScale:     thousandths(c.JitterScale),
		jitterFloor:     thousandths(c.JitterFloor),
	}
	if p.pingers > 0 {
		p.spacing = p.pingInterval / int64(p.pingers)
	}
	p.stallTimeout = int64(c.StallDetection) * p.spacing
	p.compensate = p.framing.Compensates()

	if c.MTU > 0 {
		p.wirePacketBits = wirePacketBits(int64(c.MTU), p.framing.Overhead, p.framing.ATM)
	}

	fixed := c.Mode == tuning.ModeFixed
	for i, dc := range [2]tuning.DirectionConfig{c.Upload, c.Download} { // shape.Upload = 0, shape.Download = 1
		d := dirParams{
			minK:        shape.Kbit(dc.Min),
			baseK:       shape.Kbit(dc.Base),
			maxK:        shape.Kbit(dc.Max),
			delay:       us(dc.DelayThreshold),
			up:          us(dc.FullIncreaseThreshold),
			down:        us(dc.FullCutThreshold),
			monitorOnly: dc.MonitorOnly || fixed,
		}
		if d.monitorOnly {
			// Pinned (upstream #377): the rate never moves and load percent
			// is always referenced to base.
			d.minK, d.maxK = d.baseK, d.baseK
		}
		d.startK = d.baseK
		if dc.Start != 0 && !d.monitorOnly {
			d.startK = clampRate(shape.Kbit(dc.Start), d.minK, d.maxK)
		}
		p.dir[i] = d
	}

	// The monitor interval floor is computed once from the base rates
	// (upstream forks the monitor before the controller runs).
	wireRTT := compensation(p.wirePacketBits, p.dir[0].baseK) + compensation(p.wirePacketBits, p.dir[1].baseK)
	p.monitorFloored = max(p.monitorNominal, 10*wireRTT)
	return p
}

// wirePacketBits is the largest packet on the wire in bits (AR-20):
// 8 · (MTU + overhead), or with ATM 424 bits per 48-byte cell.
func wirePacketBits(mtu, overhead int64, atm bool) int64 {
	bits := 8 * (mtu + overhead)
	if atm {
		bits = 424 * ((bits + 383) / 384)
	}
	return bits
}

// compensation is the time in µs to serialise one wire packet at rateK
// kbit/s (AR-19): trunc(1000 · P_bits / S).
func compensation(packetBits, rateK int64) int64 {
	if rateK <= 0 {
		return 0
	}
	return 1000 * packetBits / rateK
}

func us(d time.Duration) int64 {
	return int64(d.Round(time.Microsecond) / time.Microsecond)
}

func usDuration(v int64) time.Duration {
	const lim = math.MaxInt64 / int64(time.Microsecond)
	switch {
	case v > lim:
		return time.Duration(math.MaxInt64)
	case v < -lim:
		return time.Duration(math.MinInt64)
	}
	return time.Duration(v) * time.Microsecond
}

func thousandths(f float64) int64 { return int64(math.Round(f * 1000)) }

func ppm(f float64) int64 { return int64(math.Round(f * 1e6)) }

func clampRate(s, lo, hi int64) int64 {
	if s < lo {
		return lo
	}
	if s > hi {
		return hi
	}
	return s
}
