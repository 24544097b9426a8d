// SPDX-License-Identifier: Apache-2.0

package tc

import "testing"

func TestRatesAsTCPrintsThem(t *testing.T) {
	for _, c := range []struct {
		bits  int64
		shown string
		quant int64
	}{
		{20_000_000, "20Mbit", 20_000_000},
		{12_345_678, "12345Kbit", 12_345_000}, // truncated, not rounded
		{30_123_456, "30123Kbit", 30_123_000}, //
		{999_999, "999999bit", 999_992},       // first rounded down to whole bytes
		{1_500_000_000, "1500Mbit", 1_500_000_000},
		{1_000_000_008, "1Gbit", 1_000_000_000}, // divided while >= a million units
		{1_999_999_992, "1999Mbit", 1_999_000_000},
		{8, "8bit", 8},
	} {
		if got := tcRateString(c.bits); got != c.shown {
			t.Errorf("tcRateString(%d) = %q, want %q", c.bits, got, c.shown)
		}
		if got := quantiseRate(c.bits); got != c.quant {
			t.Errorf("quantiseRate(%d) = %d, want %d", c.bits, got, c.quant)
		}
		if q := quantiseRate(c.quant); q != c.quant {
			t.Errorf("quantiseRate is not idempotent at %d: %d", c.quant, q)
		}
		parsed, err := parseTCRate(tcRateString(c.bits / 8 * 8))
		if err != nil || quantiseRate(parsed) != c.quant {
			t.Errorf("parse(print(%d)) = %d, %v; want %d", c.bits, parsed, err, c.quant)
		}
	}
	if !sameRate(30_123_456, 30_123_000, false) || sameRate(30_123_456, 30_124_000, false) {
		t.Error("text rates must compare after truncation, and a real change must show")
	}
	if sameRate(30_123_456, 30_123_000, true) || !sameRate(30_123_456, 30_123_456/8*8, true) {
		t.Error("exact rates must compare to the byte")
	}
}

func TestParseTCSize(t *testing.T) {
	for in, want := range map[string]int64{"64b": 64, "1597b": 1597, "2Kb": 2048, "128Kb": 131072, "1Mb": 1 << 20, "0b": 0} {
		if got, err := parseTCSize(in); err != nil || got != want {
			t.Errorf("parseTCSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "b", "12xb", "-1b"} {
		if _, err := parseTCSize(in); err == nil {
			t.Errorf("parseTCSize(%q) accepted garbage", in)
		}
	}
}

func TestHandlesAndNames(t *testing.T) {
	for s, h := range map[string]uint32{"4d4b:": RootHandle, "4d4b:1": ClassHandle, "ffff:": IngressHandle, ":1": 1, "0:": 0, "root": 0xffffffff, "0x4d4c": LeafHandle} {
		got, err := ParseHandle(s)
		if err != nil || got != h {
			t.Errorf("ParseHandle(%q) = %x, %v; want %x", s, got, err, h)
		}
	}
	for _, bad := range []string{"xyz:", "1:2:3", "10000:", ""} {
		if _, err := ParseHandle(bad); err == nil {
			t.Errorf("ParseHandle(%q) accepted garbage", bad)
		}
	}
	if FormatHandle(ClassHandle) != "4d4b:1" || FormatHandle(RootHandle) != "4d4b:" || FormatHandle(1) != ":1" {
		t.Error("FormatHandle does not print like tc")
	}
	if IFBName(0) != "ifb-macake0" || len(IFBName(MaxSlot)) > maxIfName {
		t.Errorf("IFB names: %q, %q", IFBName(0), IFBName(MaxSlot))
	}
	for name, want := range map[string]bool{"ifb-macake0": true, "ifb-macake498": true, "ifb-macake01": false, "ifb-macake": false, "ifb0": false, "ifb-macake1x": false} {
		if _, ok := IFBSlot(name); ok != want {
			t.Errorf("IFBSlot(%q) = %v, want %v", name, ok, want)
		}
	}
}
