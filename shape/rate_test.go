// SPDX-License-Identifier: Apache-2.0

package shape

import "testing"

func TestKbit(t *testing.T) {
	for bits, want := range map[int64]int64{
		-1500: 0, 0: 0, 1: 0, 499: 0, 500: 1, 1499: 1, 1500: 2,
		1_234_567: 1235, 177_510_999: 177_511, 2_147_483_647: 2_147_484,
	} {
		if got := Kbit(bits); got != want {
			t.Errorf("Kbit(%d) = %d, want %d", bits, got, want)
		}
	}
}

func TestFramingWireBytes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		f           Framing
		bytes, pkts int64
		want        int64
	}{
		{"nothing to compensate", Framing{}, 150_000, 100, 150_000},
		{"overhead 40", Framing{Overhead: 40}, 150_000, 100, 154_000},
		{"mpu lifts small packets", Framing{MPU: 84}, 6_400, 100, 8_400},
		{"mpu below packets", Framing{MPU: 84}, 150_000, 100, 150_000},
		{"overhead then mpu", Framing{Overhead: 18, MPU: 84}, 6_400, 100, 8_400},
		// 1540 bytes per packet → ⌈1540/48⌉ = 33 cells × 53 = 1749.
		{"ATM", Framing{Overhead: 40, ATM: true}, 150_000, 100, 174_900},
		{"no packet counts", Framing{Overhead: 40}, 150_000, 0, 150_000},
	} {
		if got := tc.f.WireBytes(tc.bytes, tc.pkts); got != tc.want {
			t.Errorf("%s: WireBytes(%d, %d) = %d, want %d", tc.name, tc.bytes, tc.pkts, got, tc.want)
		}
	}
}

func TestFramingPipeRate(t *testing.T) {
	for _, tc := range []struct {
		f          Framing
		rate, size int64
		share      int64
		want       int64
	}{
		// 1500 / 1540 = 0.974025…: 20 Mbit/s on the wire is 19480 kbit/s of packets.
		{Framing{Overhead: 40}, 20_000_000, 1500, 974_025, 19_480_000},
		// 64-byte packets padded to an mpu of 84 take 76 % of the wire.
		{Framing{MPU: 84}, 10_000_000, 64, 761_904, 7_619_000},
		// The wire rate is rounded to whole kbit/s first: 20000.4 → 20000.
		{Framing{Overhead: 40}, 20_000_400, 1500, 974_025, 19_480_000},
		{Framing{}, 20_000_400, 1500, ShareOne, 20_000_400},
		{Framing{Overhead: 40}, 0, 1500, 974_025, 0},
		// Never 0, which dummynet reads as unlimited.
		{Framing{Overhead: 40}, 1000, 1, 24_390, 1000},
	} {
		if tc.f.Compensates() {
			if got := tc.f.PacketShare(tc.size); got != tc.share {
				t.Errorf("%+v: PacketShare(%d) = %d, want %d", tc.f, tc.size, got, tc.share)
			}
		}
		if got := tc.f.PipeRate(tc.rate, tc.size); got != tc.want {
			t.Errorf("%+v: PipeRate(%d, %d) = %d, want %d", tc.f, tc.rate, tc.size, got, tc.want)
		}
	}
}

func TestFormatRate(t *testing.T) {
	for bits, want := range map[int64]string{
		-5: "-5 bit/s", 0: "0 bit/s", 1: "1 bit/s", 999: "999 bit/s",
		1000: "1 kbit/s", 1500: "1.5 kbit/s", 950_000: "950 kbit/s",
		480e6: "480 Mbit/s", 22_500_000: "22.5 Mbit/s", 1_234_567: "1.234567 Mbit/s", 30_123_456: "30.123456 Mbit/s",
		2e9: "2 Gbit/s", 1_500_000_000: "1.5 Gbit/s", 3e9: "3 Gbit/s",
		// Above a gigabit a rate that is not round stays as dnctl lists it.
		2_147_483_000: "2147.483 Mbit/s", 1_234_567_000: "1234.567 Mbit/s",
		1e13: "10 Tbit/s", 1_250_000_000_000: "1.25 Tbit/s", 1_234_560_000_000: "1234.56 Gbit/s",
	} {
		if got := FormatRate(bits); got != want {
			t.Errorf("FormatRate(%d) = %q, want %q", bits, got, want)
		}
	}
}

func TestFormatApprox(t *testing.T) {
	for _, tc := range []struct {
		bps  float64
		want string
	}{
		{48_234_000, "48.2 Mbit/s"}, {480_000_000, "480 Mbit/s"}, {950_000, "950 kbit/s"},
		{1.5e9, "1.50 Gbit/s"}, {12e6, "12.0 Mbit/s"}, {0, "0 bit/s"}, {-3, "0 bit/s"},
		// Three significant digits, as a plan shows the same rate (issue
		// 27, item 8), and rounding up into the next unit.
		{4_493_921, "4.49 Mbit/s"}, {9_999_000, "10.0 Mbit/s"}, {999_700, "1.00 Mbit/s"}, {99_960, "100 kbit/s"},
	} {
		if got := FormatApprox(tc.bps); got != tc.want {
			t.Errorf("FormatApprox(%v) = %q, want %q", tc.bps, got, tc.want)
		}
	}
}

// TestFormatRateShort: a plan shows a rate to the three significant digits
// status shows, never "4.493921 Mbit/s"; where two rates would look the
// same, a change shows as many digits as it takes (issue 27, item 8).
func TestFormatRateShort(t *testing.T) {
	for bits, want := range map[int64]string{
		4_493_921: "4.49 Mbit/s", 20_000_000: "20 Mbit/s", 62_500_000: "62.5 Mbit/s", 1_234_567_890: "1.23 Gbit/s",
		999_999: "1 Mbit/s", 950: "950 bit/s", 12_345: "12.3 kbit/s",
	} {
		if got := FormatRateShort(bits); got != want {
			t.Errorf("FormatRateShort(%d) = %q, want %q", bits, got, want)
		}
	}
	for _, tc := range []struct {
		before, after int64
		want          [2]string
	}{
		{4_493_921, 5_000_000, [2]string{"4.49 Mbit/s", "5 Mbit/s"}},
		{4_493_921, 4_494_000, [2]string{"4.4939 Mbit/s", "4.494 Mbit/s"}},
		{4_493_921, 4_493_921, [2]string{"4.49 Mbit/s", "4.49 Mbit/s"}},
	} {
		b, a := FormatRateChange(tc.before, tc.after)
		if [2]string{b, a} != tc.want {
			t.Errorf("FormatRateChange(%d, %d) = %q, %q; want %q", tc.before, tc.after, b, a, tc.want)
		}
	}
}

// TestCompensationSaysWhyThePipeIsSlower: a plan shows the pipe rate and,
// beside it, the wire rate it stands for and why (issue 12, item 14).
func TestCompensationSaysWhyThePipeIsSlower(t *testing.T) {
	for _, tc := range []struct {
		f        Framing
		wire     int64
		pipe     int64
		explains string
	}{
		{Framing{}, 450_000_000, 450_000_000, ""},
		{Framing{Overhead: 18}, 450_000_000, 444_663_000,
			"for 450 Mbit/s on the wire (overhead compensation: a 1500-byte packet takes 1518 bytes there, with 18 bytes of overhead)"},
		{Framing{Overhead: 44, MPU: 96, ATM: true}, 20_000_000, 17_152_000,
			"for 20 Mbit/s on the wire (overhead compensation: a 1500-byte packet takes 1749 bytes there, with 44 bytes of overhead, in 53-byte ATM cells of 48)"},
		{Framing{MPU: 2000}, 10_000_000, 7_500_000,
			"for 10 Mbit/s on the wire (overhead compensation: a 1500-byte packet takes 2000 bytes there, with at least 2000 bytes)"},
	} {
		pipe, c := tc.f.Compensate(tc.wire, 1500)
		if pipe != tc.pipe || pipe != tc.f.PipeRate(tc.wire, 1500) || c.String() != tc.explains {
			t.Errorf("%+v.Compensate(%d) = %d, %q; want %d, %q", tc.f, tc.wire, pipe, c, tc.pipe, tc.explains)
		}
	}
}

// TestSameSettingsIgnoresExplanations: a pipe set from a controller
// decision (no explanation) is the same setting as the planned one.
func TestSameSettingsIgnoresExplanations(t *testing.T) {
	_, c := Framing{Overhead: 18}.Compensate(450_000_000, 1500)
	a := []Link{{Name: "wan", Interface: "en0", Download: Pipe{RateBits: 444_663_000, QueueBytes: 1 << 18, Compensation: c}}}
	b := []Link{{Name: "wan", Interface: "en0", Download: Pipe{RateBits: 444_663_000, QueueBytes: 1 << 18}}}
	if !SameSettings(a, b) || !a[0].Download.Same(b[0].Download) {
		t.Error("an explanation made two equal settings differ")
	}
	b[0].Download.RateBits--
	if SameSettings(a, b) || a[0].Download.Same(b[0].Download) {
		t.Error("different rates compare the same")
	}
	b[0].Download.RateBits++
	b[0].Interface = "en1"
	if SameSettings(a, b) {
		t.Error("different interfaces compare the same")
	}
}
