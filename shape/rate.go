// SPDX-License-Identifier: Apache-2.0

package shape

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Rate arithmetic that the controller, the reconciler and every backend
// share. Rates are int64 bit/s, as in Pipe.RateBits. Each rule has one
// home here, so a one-shot apply, a running controller and a re-plan
// arrive at the same number to the unit, and every command prints a rate
// the same way.

// Kbit rounds a rate in bit/s to the nearest whole kbit/s (halves up), and
// returns 0 for a rate that is not positive. Whole kbit/s is the step
// dummynet keeps (`bw NKbit/s`) and the unit the controller's law runs in,
// so every place that rounds must round alike: otherwise a pipe set by
// the controller and the same rate planned by apply differ by 1 kbit/s
// and the drift check fights the controller.
func Kbit(bits int64) int64 {
	if bits <= 0 {
		return 0
	}
	return (bits + 500) / 1000
}

// Framing is what the link adds to every packet that a shaper counting
// packet bytes (dummynet) does not see: Overhead bytes of framing, a
// minimum wire size MPU, and with ATM 53-byte cells of 48 payload bytes.
// The controller's rate is a wire rate, like CAKE's bandwidth with
// overhead, so the pipe must run below it by the share of the wire that
// packet bytes take. The zero Framing compensates nothing.
type Framing struct {
	// Overhead is the framing added to every packet, in bytes.
	Overhead int64
	// MPU is the fewest bytes a packet takes on the wire.
	MPU int64
	// ATM counts the wire in 53-byte cells that carry 48 bytes each.
	ATM bool
}

// Compensates reports whether f changes any rate: with no overhead, no
// MPU and no ATM the pipe rate is the wire rate exactly.
func (f Framing) Compensates() bool { return f.Overhead > 0 || f.MPU > 0 || f.ATM }

// WireBytes is how many bytes pkts packets of bytes bytes in all take on
// the wire: each packet's wire size is max(size + Overhead, MPU), rounded
// up to whole 53-byte cells with ATM. With only totals known, every packet
// is taken to have the mean size. Without packets, or when f compensates
// nothing, it is bytes.
func (f Framing) WireBytes(bytes, pkts int64) int64 {
	if !f.Compensates() || pkts <= 0 || bytes <= 0 {
		return bytes
	}
	if !f.ATM {
		return max(bytes+pkts*f.Overhead, pkts*f.MPU)
	}
	perPacket := max((bytes+pkts*f.Overhead+pkts-1)/pkts, f.MPU)
	cells := (perPacket + 47) / 48
	return pkts * cells * 53
}

// ShareOne is a share of 1 in the parts per million that PacketShare
// returns and PipeKbit takes: integer ppm keep the controller's law
// exact and identical on every platform.
const ShareOne = 1_000_000

// PacketShare is the share of the wire, in ppm, that packet bytes take
// when every packet is size bytes: size / WireBytes(size, 1), truncated,
// at least 1. Before the controller has seen any traffic it assumes
// MTU-sized packets, and a one-shot apply does the same.
func (f Framing) PacketShare(size int64) int64 {
	return max(1, size*ShareOne/f.WireBytes(size, 1))
}

// PipeKbit is the pipe rate, in kbit/s, for a wire rate of wireK kbit/s
// when packet bytes take share ppm of the wire: wireK × share, truncated,
// at least 1 kbit/s (0 would mean unlimited to dummynet).
func PipeKbit(wireK, share int64) int64 {
	return max(1, wireK*share/ShareOne)
}

// PipeRate converts a wire rate in bit/s to the pipe rate, in whole kbit/s
// as bit/s, for packets of size bytes: Kbit, then PipeKbit at
// PacketShare(size). A rate that is not positive, or a Framing that
// compensates nothing, comes back unchanged.
func (f Framing) PipeRate(wireBits, size int64) int64 {
	if !f.Compensates() || wireBits <= 0 {
		return wireBits
	}
	return PipeKbit(Kbit(wireBits), f.PacketShare(size)) * 1000
}

// Compensation is how a pipe rate was worked out from a rate on the wire
// (overhead compensation, PipeRate): the policy's and the controller's
// rates count the wire, a shaper that counts packet bytes only (dummynet)
// runs below them by the share of the wire that packet bytes take. The
// zero Compensation means there was none.
type Compensation struct {
	// WireBits is the rate on the wire, in bit/s.
	WireBits int64
	// Framing is what the link adds to each packet.
	Framing Framing
	// PacketBytes is the packet size the share was taken at (the MTU:
	// before any traffic is seen, packets are taken to be full-size).
	PacketBytes int64
}

// Compensate returns the pipe rate for wireBits at packets of size bytes
// (PipeRate) and how it was worked out; the Compensation is zero when f
// changes nothing.
func (f Framing) Compensate(wireBits, size int64) (int64, Compensation) {
	pipe := f.PipeRate(wireBits, size)
	if pipe == wireBits {
		return pipe, Compensation{}
	}
	return pipe, Compensation{WireBits: wireBits, Framing: f, PacketBytes: size}
}

// String says where a pipe rate comes from, for a plan: "for 450 Mbit/s
// on the wire (overhead compensation: a 1500-byte packet takes 1518 bytes
// there, with 18 bytes of overhead)". It is "" for the zero Compensation.
func (c Compensation) String() string {
	if c == (Compensation{}) {
		return ""
	}
	f, size := c.Framing, c.PacketBytes
	var how []string
	if f.Overhead > 0 {
		how = append(how, fmt.Sprintf("%d bytes of overhead", f.Overhead))
	}
	if f.MPU > size+f.Overhead {
		how = append(how, fmt.Sprintf("at least %d bytes", f.MPU))
	}
	if f.ATM {
		how = append(how, "in 53-byte ATM cells of 48")
	}
	return fmt.Sprintf("for %s on the wire (overhead compensation: a %d-byte packet takes %d bytes there, with %s)",
		FormatRate(c.WireBits), size, f.WireBytes(size, 1), strings.Join(how, ", "))
}

// FormatRate renders a rate in bit/s for people, the one way every
// command, plan and message prints a rate: "480 Mbit/s", "30.123456
// Mbit/s", "950 kbit/s", "999 bit/s", "2147.483 Mbit/s", "10 Tbit/s".
//
// Units are SI with the SI spelling (a lower-case k, as in "kbit/s"), and
// the number is exact, with no trailing zeros: a plan must never hide a
// difference in the last kbit/s. Gbit/s and Tbit/s are used only for a
// rate they show with at most two decimals; any other rate of a gigabit
// or more stays in Mbit/s with kbit/s decimals, as dnctl lists it
// ("2147.483 Mbit/s", not "2.147483 Gbit/s"). Rates that are not
// positive print in bit/s. Noisy measurements go through RoundMeasured
// first.
func FormatRate(bits int64) string {
	switch {
	case bits < 1000:
		return strconv.FormatInt(bits, 10) + " bit/s"
	case bits >= 1e12 && bits%1e10 == 0:
		return decimal(bits, 1e12) + " Tbit/s"
	case bits >= 1e9 && bits%1e7 == 0:
		return decimal(bits, 1e9) + " Gbit/s"
	case bits >= 1e6:
		return decimal(bits, 1e6) + " Mbit/s"
	}
	return decimal(bits, 1e3) + " kbit/s"
}

// decimal prints v/unit exactly (unit a power of ten, v ≥ 0), without
// trailing zeros.
func decimal(v, unit int64) string {
	whole, frac := v/unit, v%unit
	if frac == 0 {
		return strconv.FormatInt(whole, 10)
	}
	digits := len(strconv.FormatInt(unit, 10)) - 1
	return strings.TrimRight(fmt.Sprintf("%d.%0*d", whole, digits, frac), "0")
}

// FormatApprox renders a rate for a readout that changes all the time or
// was measured (status, measure, monitor, bench): to three significant
// digits, zeros kept so the columns line up ("4.49 Mbit/s", "12.0
// Mbit/s", "480 Mbit/s", "950 kbit/s"). Plans use FormatRateShort, the
// same digits without the padding.
func FormatApprox(bps float64) string {
	units := []struct {
		div  float64
		name string
	}{{1e9, "Gbit/s"}, {1e6, "Mbit/s"}, {1e3, "kbit/s"}}
	for i, u := range units {
		if bps >= u.div {
			v := bps / u.div
			switch {
			case v >= 999.5 && i > 0:
				return FormatApprox(math.Round(v) * u.div) // 999.7 kbit/s rounds to 1.00 Mbit/s
			case v >= 99.95:
				return fmt.Sprintf("%.0f %s", v, u.name)
			case v >= 9.995:
				return fmt.Sprintf("%.1f %s", v, u.name)
			}
			return fmt.Sprintf("%.2f %s", v, u.name)
		}
	}
	return fmt.Sprintf("%.0f bit/s", math.Max(bps, 0))
}

// FormatRateShort renders a rate a plan sets to three significant digits,
// trailing zeros dropped: "4.49 Mbit/s", "20 Mbit/s", "62.5 Mbit/s", as
// status and measure show rates; the exact value is in --show-commands and
// --json.
func FormatRateShort(bits int64) string {
	return FormatRate(roundSignificant(bits, 3))
}

// FormatRateChange renders a rate's old and new value as FormatRateShort
// does, with as many more digits as it takes to tell them apart.
func FormatRateChange(before, after int64) (string, string) {
	for digits := 3; ; digits++ {
		b, a := FormatRate(roundSignificant(before, digits)), FormatRate(roundSignificant(after, digits))
		if b != a || before == after || digits >= 19 {
			return b, a
		}
	}
}

// roundSignificant rounds v (≥ 0) to digits significant digits, half up.
func roundSignificant(v int64, digits int) int64 {
	step := int64(1)
	for n := v; n >= 10 && digits > 0; n /= 10 {
		if digits > 1 {
			digits--
			continue
		}
		step *= 10
	}
	if step == 1 {
		return v
	}
	return (v + step/2) / step * step
}
