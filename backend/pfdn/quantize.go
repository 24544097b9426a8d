// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// Limits of what macake sends to dnctl (reference §1.4–§1.5).
const (
	// MaxRateKbit is the highest bandwidth dnctl stores: a C int of bit/s
	// (2147483647) holds at most 2147483 whole Kbit/s. Above it dnctl fails
	// or, worse, wraps silently.
	MaxRateKbit = 2147483
	// MaxQueueKB is the largest byte queue dnctl accepts (exactly 1 MB is
	// accepted, one byte more is `queue size must be < 1MB`).
	MaxQueueKB = 1024
)

// Limits are dummynet's, as backend.Info reports them.
var Limits = shape.Limits{Shaper: "dummynet", MaxRateBits: MaxRateKbit * 1000, MaxQueueBytes: MaxQueueKB * 1024}

// PipeConfig is one dummynet pipe's configuration, as dnctl lists it back.
// Desired pipes are quantised to this form before they are compared, so a
// re-plan never shows a change that only exists in the last digit.
type PipeConfig struct {
	// BandwidthBits is the rate in bit/s; 0 means unlimited.
	BandwidthBits int64
	// ClockInterface is set when the pipe is clocked by an interface
	// instead of a rate (`bw en0`); macake never does that.
	ClockInterface string
	// DelayMS is the added delay in milliseconds.
	DelayMS int64
	// QueueBytes is the byte-queue limit when QueueSlots is 0.
	QueueBytes int64
	// QueueSlots is the slot-queue limit (packets) when the queue is not
	// counted in bytes.
	QueueSlots int64
	// PLR is the packet loss rate as dnctl prints it (6 decimals), "" for 0.
	PLR string
	// Mask is the flow mask, "" when there is none.
	Mask string
	// RED is the RED/GRED line, "" for droptail.
	RED string
}

// Quantized is a desired pipe rate and queue rounded to what macake sends:
// whole Kbit/s and whole KBytes, within dnctl's limits.
type Quantized struct {
	RateKbit int64
	QueueKB  int64
	// Notes explains any clamping, for plan warnings.
	Notes []string
}

// Quantize rounds p to whole Kbit/s (nearest, at least 1: a 0 would mean
// unlimited) and whole KBytes (up, so a queue never holds less than asked;
// at least 1 KB, because a byte queue of 0 drops everything and a slot
// queue would make the latency depend on packet sizes), and clamps both to
// dnctl's limits.
func Quantize(p shape.Pipe) Quantized {
	var q Quantized
	q.RateKbit = shape.Kbit(p.RateBits)
	switch {
	case p.RateBits <= 0:
		q.RateKbit = 1
		q.Notes = append(q.Notes, fmt.Sprintf("rate %d bit/s is not positive; using 1 kbit/s", p.RateBits))
	case q.RateKbit < 1:
		q.RateKbit = 1
		q.Notes = append(q.Notes, fmt.Sprintf("rate %s is below dummynet's 1 kbit/s step; using 1 kbit/s", shape.FormatRate(p.RateBits)))
	case q.RateKbit > MaxRateKbit:
		q.RateKbit = MaxRateKbit
		q.Notes = append(q.Notes, fmt.Sprintf("rate %s is above dummynet's maximum; using %s", shape.FormatRate(p.RateBits), shape.FormatRate(MaxRateKbit*1000)))
	}
	q.QueueKB = (p.QueueBytes + 1023) / 1024
	switch {
	case p.QueueBytes <= 0:
		q.QueueKB = 1
		q.Notes = append(q.Notes, fmt.Sprintf("queue %d bytes is not positive; using 1 KB", p.QueueBytes))
	case q.QueueKB > MaxQueueKB:
		q.QueueKB = MaxQueueKB
		q.Notes = append(q.Notes, fmt.Sprintf("queue %s is above dummynet's 1 MB maximum; using 1024 KB", shape.FormatBytes(p.QueueBytes)))
	}
	return q
}

// Config returns the pipe configuration dnctl lists after `bw
// RateKbitKbit/s queue QueueKBKbytes`: a whole-Kbit/s rate prints exactly
// (3 decimals of Kbit/s, or of Mbit/s, which is still 1 Kbit/s), and a
// whole-KB byte queue prints exactly (as B below 8 KB, as KB above).
func (q Quantized) Config() PipeConfig {
	return PipeConfig{BandwidthBits: q.RateKbit * 1000, QueueBytes: q.QueueKB * 1024}
}

// Args returns the config words, e.g. ["bw", "500000Kbit/s", "queue",
// "256Kbytes"]. dnctl parses numbers with strtoul(…, 0) and stops at the
// first non-digit, so the numbers are plain decimal integers with no
// leading zero (which would mean octal), no decimals (truncated) and no
// M/G suffix (lower-case m and G are not recognised). A config call is a
// full replacement, so these words are all of it: delay, loss, mask and RED
// go back to their defaults (none) on every call.
func (q Quantized) Args() []string {
	return []string{
		"bw", strconv.FormatInt(q.RateKbit, 10) + "Kbit/s",
		"queue", strconv.FormatInt(q.QueueKB, 10) + "Kbytes",
	}
}

// PipeCommand returns the one dnctl call that configures pipe n with p.
func PipeCommand(dnctl string, n int, p shape.Pipe) execrun.Command {
	argv := append([]string{dnctl, "pipe", strconv.Itoa(n), "config"}, Quantize(p).Args()...)
	return execrun.Command{Argv: argv}
}

// String renders the configuration for people, e.g. "500 Mbit/s, queue 256 KB".
func (c PipeConfig) String() string {
	var b strings.Builder
	b.WriteString(c.rateString())
	b.WriteString(", queue " + c.queueString())
	if c.DelayMS != 0 {
		fmt.Fprintf(&b, ", delay %d ms", c.DelayMS)
	}
	if c.PLR != "" {
		b.WriteString(", loss " + c.PLR)
	}
	if c.Mask != "" {
		b.WriteString(", mask " + c.Mask)
	}
	if c.RED != "" {
		b.WriteString(", " + c.RED)
	}
	return b.String()
}

func (c PipeConfig) queueString() string {
	if c.QueueSlots != 0 {
		return fmt.Sprintf("%d slots", c.QueueSlots)
	}
	return shape.FormatBytes(c.QueueBytes)
}

// rateString renders the bandwidth for people: shape.FormatRateShort,
// except the two things a dummynet pipe can have instead of a rate.
func (c PipeConfig) rateString() string {
	switch {
	case c.ClockInterface != "":
		return "clocked by " + c.ClockInterface
	case c.BandwidthBits == 0:
		return "unlimited" // dnctl's `bw 0`
	}
	return shape.FormatRateShort(c.BandwidthBits)
}
