// SPDX-License-Identifier: Apache-2.0

// Package units holds the value types of macake's files and flags: Rate
// (bit/s, SI prefixes), Size (bytes, 1024-based) and Duration, each of
// which must carry its unit, and RateOrAuto and SizeOrAuto, which also take
// "auto". Files and flags share one grammar and one set of error texts: the
// types implement encoding.TextUnmarshaler and flag.Value.
package units

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/shape"
)

// Rate is a bandwidth in bit/s. Its text form needs a unit and uses SI
// decimal prefixes, case-insensitive, with an optional "/s" and optional
// space: "500mbit", "1.5gbit", "800kbit", "250Mbit/s", "1.5 Mbit/s".
//
// Every Rate is between MinRate and MaxRate, the bounds of every backend;
// a backend's own shaper may take less (dummynet: 2147.483 Mbit/s), which
// is checked where the backend is known (LoadOptions.Limits). The same
// grammar and error texts serve policy files and flags: Rate implements
// encoding.TextUnmarshaler and flag.Value.
type Rate int64

// Rate units, in bit/s.
const (
	Bit  Rate = 1
	Kbit Rate = 1000 * Bit
	Mbit Rate = 1000 * Kbit
	Gbit Rate = 1000 * Mbit
)

// MinRate and MaxRate bound every Rate, whatever the backend: 1 kbit/s is
// the step dummynet and the controller work in, and shape.MaxRateBits the
// highest rate macake handles anywhere.
const (
	MinRate Rate = 1 * Kbit
	MaxRate Rate = shape.MaxRateBits
)

var rateUnits = map[string]Rate{"bit": Bit, "kbit": Kbit, "mbit": Mbit, "gbit": Gbit}

// ParseRate parses the text form of a Rate (see Rate).
func ParseRate(s string) (Rate, error) {
	var r Rate
	err := r.UnmarshalText([]byte(s))
	return r, err
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Rate) UnmarshalText(text []byte) error {
	s := string(text)
	num, unit, err := SplitNumber(s)
	if err != nil {
		return fmt.Errorf("rate %q: %v; write it like \"250mbit\" or \"1.5 Mbit/s\"", s, err)
	}
	lunit := strings.ToLower(unit)
	if unit == "" {
		return fmt.Errorf("rate %q needs a unit; did you mean %q? (sqm-scripts uses kbit/s)", s, num+"kbit")
	}
	base := strings.TrimSuffix(lunit, "/s")
	mult, ok := rateUnits[base]
	if !ok {
		for _, p := range []string{"", "k", "m", "g"} {
			if lunit == p+"bps" {
				return &UnitHint{What: "rate", Text: s, Reason: fmt.Sprintf("%q is ambiguous (tc reads it as bytes per second)", unit), Fix: num + p + "bit"}
			}
		}
		return fmt.Errorf("rate %q: unknown unit %q; use bit, kbit, mbit or gbit (SI, per second), e.g. %q", s, unit, num+"mbit")
	}
	v, err := scaleDecimal(num, int64(mult))
	if err != nil {
		return fmt.Errorf("rate %q: %v", s, err)
	}
	switch {
	case v < int64(MinRate):
		return fmt.Errorf("rate %q is below %s, the smallest rate macake shapes", s, MinRate)
	case v > int64(MaxRate):
		return fmt.Errorf("rate %q is above %s, the highest rate macake shapes", s, MaxRate)
	}
	*r = Rate(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler with the canonical form
// String returns, which UnmarshalText reads back unchanged.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// String returns the shortest exact form: "250mbit", "1500kbit", "1gbit".
func (r Rate) String() string {
	for _, u := range []struct {
		name string
		v    Rate
	}{{"gbit", Gbit}, {"mbit", Mbit}, {"kbit", Kbit}} {
		if r != 0 && r%u.v == 0 {
			return strconv.FormatInt(int64(r/u.v), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(r), 10) + "bit"
}

// Set implements flag.Value.
func (r *Rate) Set(s string) error { return r.UnmarshalText([]byte(s)) }

// Placeholder names a rate flag's value in help.
func (*Rate) Placeholder() string { return "RATE" }

// Human returns the rate as people read it: shape.FormatRate, the one
// human form of a rate ("480 Mbit/s", "22.5 Mbit/s", "950 kbit/s").
func (r Rate) Human() string { return shape.FormatRate(int64(r)) }

// Size is an amount of bytes. Its text form needs a unit, 1024-based,
// case-insensitive: "1500B", "256KB", "1MB" (KiB and MiB are accepted too).
// It implements encoding.TextUnmarshaler and flag.Value.
type Size int64

// Size units, in bytes.
const (
	Byte     Size = 1
	Kilobyte Size = 1024 * Byte
	Megabyte Size = 1024 * Kilobyte
)

var sizeUnits = map[string]Size{"b": Byte, "kb": Kilobyte, "kib": Kilobyte, "mb": Megabyte, "mib": Megabyte}

// ParseSize parses the text form of a Size (see Size).
func ParseSize(s string) (Size, error) {
	var z Size
	err := z.UnmarshalText([]byte(s))
	return z, err
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (z *Size) UnmarshalText(text []byte) error {
	s := string(text)
	num, unit, err := SplitNumber(s)
	if err != nil {
		return fmt.Errorf("size %q: %v; write it like \"256KB\"", s, err)
	}
	if unit == "" {
		return fmt.Errorf("size %q needs a unit: B, KB or MB (1024-based); did you mean %q? (dnctl would read a bare number as packet slots)", s, num+"KB")
	}
	mult, ok := sizeUnits[strings.ToLower(unit)]
	if !ok {
		return fmt.Errorf("size %q: unknown unit %q; use B, KB or MB (1024-based), e.g. %q", s, unit, num+"KB")
	}
	v, err := scaleDecimal(num, int64(mult))
	if err != nil {
		return fmt.Errorf("size %q: %v", s, err)
	}
	*z = Size(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (z Size) MarshalText() ([]byte, error) { return []byte(z.String()), nil }

// String returns the shortest exact form: "1500B", "256KB", "1MB".
func (z Size) String() string {
	switch {
	case z != 0 && z%Megabyte == 0:
		return strconv.FormatInt(int64(z/Megabyte), 10) + "MB"
	case z != 0 && z%Kilobyte == 0:
		return strconv.FormatInt(int64(z/Kilobyte), 10) + "KB"
	}
	return strconv.FormatInt(int64(z), 10) + "B"
}

// Set implements flag.Value.
func (z *Size) Set(s string) error { return z.UnmarshalText([]byte(s)) }

// Placeholder names a size flag's value in help.
func (*Size) Placeholder() string { return "SIZE" }

// Duration is a non-negative time.Duration whose text form must carry a
// unit ("300ms", "1.5s", "1m"). A bare number is refused: BurntSushi/toml
// would silently read `interval = 30` into a time.Duration as 30 ns. Only
// "0" may go without one, as in Go's own syntax: zero is zero in every
// unit, and flags such as `monitor --duration 0` give it a meaning. It
// implements encoding.TextUnmarshaler and flag.Value.
type Duration time.Duration

// ParseDuration parses the text form of a Duration (see Duration).
func ParseDuration(s string) (Duration, error) {
	var d Duration
	err := d.UnmarshalText([]byte(s))
	return d, err
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	if s == "0" {
		*d = 0
		return nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return fmt.Errorf("duration %q needs a unit, e.g. %q or %q", string(text), s+"ms", s+"s")
	}
	if strings.HasPrefix(s, "-") {
		return fmt.Errorf("duration %q must not be negative", string(text))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: not a duration; write it like \"300ms\", \"1.5s\" or \"2m\"", string(text))
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String returns Go's duration form ("300ms", "1m0s"), which
// UnmarshalText reads back.
func (d Duration) String() string { return time.Duration(d).String() }

// Set implements flag.Value.
func (d *Duration) Set(s string) error { return d.UnmarshalText([]byte(s)) }

// Placeholder names a duration flag's value in help.
func (*Duration) Placeholder() string { return "DURATION" }

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Auto is the text that asks macake to work a value out itself.
const Auto = "auto"

// RateOrAuto is a Rate or "auto" (work it out from measurements).
type RateOrAuto struct {
	Auto bool
	Rate Rate
}

// IsSet reports whether a value was given (a rate or "auto").
func (r RateOrAuto) IsSet() bool { return r.Auto || r.Rate != 0 }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *RateOrAuto) UnmarshalText(text []byte) error {
	if string(text) == Auto {
		*r = RateOrAuto{Auto: true}
		return nil
	}
	if strings.EqualFold(strings.TrimSpace(string(text)), Auto) {
		return fmt.Errorf("%q: write \"auto\" in lower case", string(text))
	}
	var v Rate
	if err := v.UnmarshalText(text); err != nil {
		return err
	}
	*r = RateOrAuto{Rate: v}
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (r RateOrAuto) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// String returns "auto", the rate, or "" when unset.
func (r RateOrAuto) String() string {
	switch {
	case r.Auto:
		return Auto
	case r.Rate == 0:
		return ""
	}
	return r.Rate.String()
}

// Set implements flag.Value.
func (r *RateOrAuto) Set(s string) error { return r.UnmarshalText([]byte(s)) }

// Placeholder names the flag's value in help.
func (*RateOrAuto) Placeholder() string { return "RATE|auto" }

// SizeOrAuto is a Size or "auto" (work it out from the current rate).
type SizeOrAuto struct {
	Auto bool
	Size Size
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (z *SizeOrAuto) UnmarshalText(text []byte) error {
	if string(text) == Auto {
		*z = SizeOrAuto{Auto: true}
		return nil
	}
	if strings.EqualFold(strings.TrimSpace(string(text)), Auto) {
		return fmt.Errorf("%q: write \"auto\" in lower case", string(text))
	}
	var v Size
	if err := v.UnmarshalText(text); err != nil {
		return err
	}
	*z = SizeOrAuto{Size: v}
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (z SizeOrAuto) MarshalText() ([]byte, error) { return []byte(z.String()), nil }

// String returns "auto", the size, or "" when unset.
func (z SizeOrAuto) String() string {
	switch {
	case z.Auto:
		return Auto
	case z.Size == 0:
		return ""
	}
	return z.Size.String()
}

// Set implements flag.Value.
func (z *SizeOrAuto) Set(s string) error { return z.UnmarshalText([]byte(s)) }

// Placeholder names the flag's value in help.
func (*SizeOrAuto) Placeholder() string { return "SIZE|auto" }

// UnitHint is a parse error that knows the value the user most likely
// meant, so that other messages (an unquoted value's) can offer it too.
type UnitHint struct {
	What, Text string // "rate", and the text as written
	Reason     string // what is wrong with it
	Fix        string // the likely intended text
}

// Error returns "rate TEXT: REASON; did you mean FIX?".
func (h *UnitHint) Error() string {
	return fmt.Sprintf("%s %q: %s; did you mean %q?", h.What, h.Text, h.Reason, h.Fix)
}

// SplitNumber splits "1.5 Mbit/s" into "1.5" and "Mbit/s". The number is
// unsigned decimal digits with an optional fraction; anything else is an
// error that says what is wrong.
func SplitNumber(s string) (num, unit string, err error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return "", "", errors.New("empty")
	}
	if t[0] == '-' {
		return "", "", errors.New("must not be negative")
	}
	if t[0] == '+' {
		t = t[1:]
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num = t[:i]
	if num == "" || strings.Count(num, ".") > 1 || num[0] == '.' || num[len(num)-1] == '.' {
		return "", "", errors.New("does not start with a number")
	}
	return num, strings.TrimSpace(t[i:]), nil
}

// scaleDecimal returns num×mult exactly, where num is "digits[.digits]",
// refusing fractions of the base unit (bit or byte) and overflow.
func scaleDecimal(num string, mult int64) (int64, error) {
	whole, frac, _ := strings.Cut(num, ".")
	frac = strings.TrimRight(frac, "0")
	if len(whole)+len(frac) > 40 {
		return 0, errors.New("too large")
	}
	n, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok {
		return 0, errors.New("not a number")
	}
	n.Mul(n, big.NewInt(mult))
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	q, rem := new(big.Int).QuoRem(n, pow, new(big.Int))
	if rem.Sign() != 0 {
		return 0, errors.New("more precise than the unit allows")
	}
	if !q.IsInt64() {
		return 0, errors.New("too large")
	}
	return q.Int64(), nil
}
