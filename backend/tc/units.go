// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"fmt"
	"strconv"
	"strings"
)

// The kernel keeps shaper rates in bytes per second, and tc's text output
// truncates them further: a rate is divided by 1000 while it is a multiple
// of 1000 or at least a million units, so "12345678bit" reads back as
// "12345Kbit". Desired and live rates are therefore compared after the same
// quantisation, never raw.

// quantiseRate returns bits/s as tc's text output would show it for a rate
// configured as bits/s: first rounded down to whole bytes, then truncated
// the way tc prints it. It is idempotent.
func quantiseRate(bits int64) int64 {
	if bits <= 0 {
		return 0
	}
	v, scale := shownRate(uint64(bits/8) * 8)
	return int64(v * scale)
}

// shownRate splits a rate in bit/s into tc's printed mantissa and unit.
func shownRate(bits uint64) (mantissa, scale uint64) {
	mantissa, scale = bits, 1
	for i := 0; i < 4; i++ { // "", K, M, G, T
		if mantissa < 1000 {
			break
		}
		if mantissa%1000 != 0 && mantissa < 1000*1000 {
			break
		}
		mantissa /= 1000
		scale *= 1000
	}
	return mantissa, scale
}

// tcRateString renders bits/s as tc prints it, e.g. "12345Kbit".
func tcRateString(bits int64) string {
	if bits <= 0 {
		return "0bit"
	}
	m, s := shownRate(uint64(bits))
	unit := map[uint64]string{1: "", 1e3: "K", 1e6: "M", 1e9: "G", 1e12: "T"}[s]
	return strconv.FormatUint(m, 10) + unit + "bit"
}

// rateArg renders bits/s as an exact tc rate argument ("20000000bit").
func rateArg(bits int64) string { return strconv.FormatInt(bits, 10) + "bit" }

// parseTCRate reads a rate as tc prints it ("20Mbit", "12345Kbit",
// "800bit", with -iec "1Kibit"; "bps" suffixes are bytes) into bits/s.
func parseTCRate(s string) (int64, error) {
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if num == "" {
		return 0, fmt.Errorf("bad rate %q", s)
	}
	unit := strings.ToLower(s[len(num):])
	v, err := strconv.ParseUint(num, 10, 63)
	if err != nil {
		return 0, fmt.Errorf("bad rate %q", s)
	}
	var mult uint64
	switch unit {
	case "bit", "":
		mult = 1
	case "kbit":
		mult = 1e3
	case "mbit":
		mult = 1e6
	case "gbit":
		mult = 1e9
	case "tbit":
		mult = 1e12
	case "kibit":
		mult = 1 << 10
	case "mibit":
		mult = 1 << 20
	case "gibit":
		mult = 1 << 30
	case "tibit":
		mult = 1 << 40
	case "bps":
		mult = 8
	case "kbps":
		mult = 8e3
	case "mbps":
		mult = 8e6
	case "gbps":
		mult = 8e9
	default:
		return 0, fmt.Errorf("bad rate %q: unknown unit %q", s, unit)
	}
	if v > (1<<63-1)/mult {
		return 0, fmt.Errorf("bad rate %q: too large", s)
	}
	return int64(v * mult), nil
}

// parseTCSize reads a size as tc prints it ("64b", "2Kb", "1Mb"; tc's Kb is
// 1024 bytes) into bytes.
func parseTCSize(s string) (int64, error) {
	num := strings.TrimRightFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if num == "" {
		return 0, fmt.Errorf("bad size %q", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v > 1<<40 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	switch strings.ToLower(s[len(num):]) {
	case "b", "":
	case "kb", "k":
		v *= 1024
	case "mb", "m":
		v *= 1024 * 1024
	case "gb", "g":
		v *= 1024 * 1024 * 1024
	default:
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(v), nil
}

// htbBurst is the htb bucket size for a rate: one millisecond of traffic,
// at least tc's own default of 1600 bytes. tc's default bucket (rate/HZ +
// MTU, quantised to scheduler ticks) collapses to 0 bytes at 10 Gbit/s and
// is too small to reach the rate above about 1 Gbit/s; 1 ms keeps htb
// accurate while adding at most 1 ms of burst.
func htbBurst(bits int64) int64 {
	b := bits / 8 / 1000
	if b < 1600 {
		b = 1600
	}
	return b
}
