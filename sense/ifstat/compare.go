// SPDX-License-Identifier: Apache-2.0

package ifstat

import "fmt"

// AgreeWithinRounding checks a rounded reading (macOS NET_RT_IFLIST2: byte
// counters rounded down to 1 KiB and truncated to 32 bits) against exact
// readings of the same interface taken just before and just after it: its
// packet counters must lie between them, and its byte counters between
// them once rounded the same way. It returns every disagreement; `macake
// selftest` uses it to check the two counter sources the darwin Reader
// uses against each other on a real Mac.
func AgreeWithinRounding(before, rounded, after Counters) []string {
	var problems []string
	if before.Index != 0 && rounded.Index != 0 && before.Index != rounded.Index {
		problems = append(problems, fmt.Sprintf("interface index %d in the dump, %d from the exact source", rounded.Index, before.Index))
	}
	for _, c := range []struct {
		name            string
		lo, got, hi     uint64
		rounded32, wrap bool
	}{
		{"received packets", before.RxPackets, rounded.RxPackets, after.RxPackets, false, false},
		{"sent packets", before.TxPackets, rounded.TxPackets, after.TxPackets, false, false},
		{"received bytes", before.RxBytes, rounded.RxBytes, after.RxBytes, true, true},
		{"sent bytes", before.TxBytes, rounded.TxBytes, after.TxBytes, true, true},
	} {
		lo, hi := c.lo, c.hi
		if c.rounded32 {
			lo, hi = (lo&^1023)&0xffffffff, hi&0xffffffff
		}
		in := lo <= c.got && c.got <= hi
		if c.wrap && hi < lo { // the 32-bit value wrapped between the readings
			in = c.got >= lo || c.got <= hi
		}
		if !in {
			problems = append(problems, fmt.Sprintf("%s: %d in the rounded dump, not between %d and %d from the exact source", c.name, c.got, lo, hi))
		}
	}
	return problems
}
