// SPDX-License-Identifier: Apache-2.0

package units

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
	}{
		{"500mbit", 500 * Mbit},
		{"1.5gbit", 1500 * Mbit},
		{"800kbit", 800 * Kbit},
		{"250Mbit/s", 250 * Mbit},
		{"1.5 Mbit/s", 1500 * Kbit},
		{"0.5GBIT", 500 * Mbit},
		{"22000kbit", 22 * Mbit},
		{"1000bit", Kbit},
		{"1.000001mbit", 1000001},
		{"2147mbit", 2147 * Mbit},
		{"17.6gbit", 17600 * Mbit},
		{"1000gbit", MaxRate},
		{" 10mbit ", 10 * Mbit},
	} {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRateRejects(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"100mbps", `did you mean "100mbit"?`},
		{"100Mbps", `did you mean "100mbit"?`},
		{"800kbps", `did you mean "800kbit"?`},
		{"1gbps", `did you mean "1gbit"?`},
		{"100mbps", "tc reads it as bytes per second"},
		{"85000", `needs a unit; did you mean "85000kbit"? (sqm-scripts uses kbit/s)`},
		{"1.5", `did you mean "1.5kbit"?`},
		{"100mb", `unknown unit "mb"`},
		{"100 megabit", `unknown unit "megabit"`},
		{"mbit", "does not start with a number"},
		{"", "empty"},
		{"-5mbit", "must not be negative"},
		{"0mbit", "below 1kbit"},
		{"999bit", "below 1kbit"},
		{"1000.001gbit", "above 1000gbit, the highest rate macake shapes"},
		{"3000gbit", "above 1000gbit"},
		{"1.5bit", "more precise than the unit allows"},
		{"1..5mbit", "does not start with a number"},
		{"99999999999999999999999gbit", "too large"},
		{"1e3mbit", `unknown unit "e3mbit"`},
	} {
		_, err := ParseRate(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRate(%q) error = %v; want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func TestRateStringRoundTrips(t *testing.T) {
	for _, r := range []Rate{Kbit, 1500, 999 * Kbit, 20 * Mbit, 1500 * Kbit, Gbit, 1500 * Mbit, MaxRate, 1000001} {
		s := r.String()
		back, err := ParseRate(s)
		if err != nil || back != r {
			t.Errorf("%d → %q → %d, %v", r, s, back, err)
		}
	}
	if got := (250 * Mbit).String(); got != "250mbit" {
		t.Errorf("String = %q, want 250mbit", got)
	}
}

func TestRateHuman(t *testing.T) {
	for r, want := range map[Rate]string{
		480 * Mbit:   "480 Mbit/s",
		22500 * Kbit: "22.5 Mbit/s",
		950 * Kbit:   "950 kbit/s",
		1500 * Mbit:  "1.5 Gbit/s",
	} {
		if got := r.Human(); got != want {
			t.Errorf("%d.Human() = %q, want %q", r, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Size
	}{
		{"1500B", 1500}, {"256KB", 256 * 1024}, {"1MB", 1 << 20}, {"256kb", 256 * 1024},
		{"1.5KB", 1536}, {"64KiB", 64 * 1024}, {"10 KB", 10 * 1024},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"100", `needs a unit: B, KB or MB (1024-based); did you mean "100KB"?`},
		{"100", "packet slots"},
		{"10 slots", `unknown unit "slots"`},
		{"1.1B", "more precise than the unit allows"},
		{"-1KB", "must not be negative"},
	} {
		_, err := ParseSize(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSize(%q) error = %v; want %q", tc.in, err, tc.want)
		}
	}
	for _, z := range []Size{1500, 256 * Kilobyte, Megabyte, 1536} {
		if back, err := ParseSize(z.String()); err != nil || back != z {
			t.Errorf("%d → %q → %d, %v", z, z.String(), back, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"300ms": 300 * time.Millisecond, "1.5s": 1500 * time.Millisecond, "2m": 2 * time.Minute, "0s": 0, "0": 0,
	} {
		got, err := ParseDuration(in)
		if err != nil || got.Std() != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"30":     `duration "30" needs a unit, e.g. "30ms" or "30s"`,
		"0.3":    "needs a unit",
		"0.0":    "needs a unit",
		"-1s":    "must not be negative",
		"soon":   "not a duration",
		"30 sec": "not a duration",
	} {
		_, err := ParseDuration(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDuration(%q) error = %v; want %q", in, err, want)
		}
	}
}

func TestOrAuto(t *testing.T) {
	var r RateOrAuto
	if err := r.UnmarshalText([]byte("auto")); err != nil || !r.Auto || r.String() != "auto" {
		t.Errorf("RateOrAuto auto: %+v, %v", r, err)
	}
	if err := r.UnmarshalText([]byte("Auto")); err == nil || !strings.Contains(err.Error(), "lower case") {
		t.Errorf("RateOrAuto Auto: %v", err)
	}
	if err := r.UnmarshalText([]byte("20mbit")); err != nil || r.Auto || r.Rate != 20*Mbit {
		t.Errorf("RateOrAuto 20mbit: %+v, %v", r, err)
	}
	var z SizeOrAuto
	if err := z.UnmarshalText([]byte("64KB")); err != nil || z.Auto || z.Size != 64*Kilobyte || z.String() != "64KB" {
		t.Errorf("SizeOrAuto 64KB: %+v, %v", z, err)
	}
}

// TestFlagsShareTheGrammar proves the value types work as flags with the
// same error text as in files.
func TestFlagsShareTheGrammar(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var r Rate
	var z Size
	var d Duration
	var a RateOrAuto
	fs.Var(&r, "rate", "")
	fs.Var(&z, "size", "")
	fs.Var(&d, "interval", "")
	fs.Var(&a, "download", "")
	if err := fs.Parse([]string{"--rate", "1.5 Mbit/s", "--size", "256KB", "--interval", "300ms", "--download", "auto"}); err != nil {
		t.Fatal(err)
	}
	if r != 1500*Kbit || z != 256*Kilobyte || d.Std() != 300*time.Millisecond || !a.Auto {
		t.Errorf("flags: %v %v %v %v", r, z, d, a)
	}
	_, fileErr := ParseRate("100mbps")
	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.SetOutput(io.Discard)
	fs2.Var(&r, "rate", "")
	flagErr := fs2.Parse([]string{"--rate", "100mbps"})
	if flagErr == nil || !strings.Contains(flagErr.Error(), fileErr.Error()) {
		t.Errorf("flag error %q does not carry the file error %q", flagErr, fileErr)
	}
	fs2.Var(&d, "interval", "")
	if err := fs2.Parse([]string{"--interval", "30"}); err == nil || !strings.Contains(err.Error(), "needs a unit") {
		t.Errorf("--interval 30: %v", err)
	}
}
