// SPDX-License-Identifier: Apache-2.0

// Package controller is macake's autorate controller: the cake-autorate
// control law (implemented from reference/autorate.md, not from upstream's
// GPL source), plus macake's balanced, fixed and off modes.
//
// # Core and driver
//
// Controller is a pure, deterministic state machine. Inputs are values with
// an explicit `now`: Delay (one reflector response), Load (one read of the
// interface byte counters), Tick (time passed) and ReportApply (how applying
// a decision went). Each returns an Output: at most one Decision per
// direction (one backend update) and a few Events (engage, release, sleep,
// wake, stall, probe restart, reflector replaced). State returns a snapshot
// for status. The per-sample path does not allocate.
//
// Loop is the driver: it feeds the core from channels, with an injected
// clock, and sends decisions to a RateSetter.
//
// # Units
//
// Rates outside the package are bit/s; inside, the law runs in whole
// kbit/s, µs, thousandths and ppm with truncating integer division, exactly
// as upstream (autorate.md §5.9), so the spec's worked examples hold to the
// unit.
//
// # Overhead compensation
//
// dummynet has no per-packet overhead option: a pipe at R bit/s sends R
// bits of packet bytes per second, while the link carries each packet
// with Overhead more bytes (and at least MPU bytes, in 48-of-53-byte cells
// with ATM). The controller's rate S is a wire rate, like CAKE's bandwidth
// with overhead. With Overhead, MPU or ATM set:
//
//	wire(b, n)  = max(b + n·Overhead, n·MPU)                 (n packets of b bytes in total)
//	            = n · 53 · ⌈max(⌈b/n⌉ + Overhead, MPU) / 48⌉ (ATM)
//	achieved    = 8000 · wire(Δbytes, Δpackets) / interval  (kbit/s, for the load class)
//	pipe rate   = S · B / W
//
// where B and W are decaying sums (weight 7/8 per sample) of Δbytes and
// wire(Δbytes, Δpackets) over recent counter samples, so the ratio follows
// the observed mean packet size and is dominated by bulk traffic, which is
// when the pipe limits. Before any packets are seen the ratio assumes
// MTU-sized packets. With all three unset, pipe rate = S exactly. wire and
// the ratio-to-rate step are shape.Framing's and shape.PipeKbit, the same
// functions a one-shot apply uses (desired.PipeRate).
package controller
