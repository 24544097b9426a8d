// SPDX-License-Identifier: Apache-2.0

package clidoc

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// rate is a flag value that names itself, with a zero value that is not
// an empty string (as config.Rate's "0bit").
type rate int

func (r *rate) String() string {
	return map[bool]string{true: "0bit", false: "some"}[r == nil || *r == 0]
}
func (r *rate) Set(string) error  { *r = 1; return nil }
func (*rate) Placeholder() string { return "RATE" }

type color string

func (c *color) String() string     { return string(*c) }
func (c *color) Set(s string) error { *c = color(s); return nil }
func (*color) Choices() []string    { return []string{"auto", "never"} }

func TestFlagOfNamesValuesInCapitalsAndHidesZeroDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var r rate
	c := color("auto")
	fs.Var(&r, "download", "base rate (default: \"auto\")")
	fs.Var(&c, "color", "when to colour")
	fs.Int("streams", 8, "connections")
	fs.Int("workers", 0, "parallel runs")
	fs.String("target", "linux", "the `SYSTEM`")
	fs.String("free", "", "a string with no name")
	fs.Bool("json", false, "print JSON")
	fs.Func("config-dir", "`DIR` of the files", func(string) error { return nil })
	want := map[string]Flag{
		"download":   {Name: "download", Arg: "RATE", Usage: "base rate (default: \"auto\")"},
		"color":      {Name: "color", Arg: "auto|never", Usage: "when to colour", Default: "auto", Values: Completion{Words: []string{"auto", "never"}}},
		"streams":    {Name: "streams", Arg: "N", Usage: "connections", Default: "8"},
		"workers":    {Name: "workers", Arg: "N", Usage: "parallel runs"},
		"target":     {Name: "target", Arg: "SYSTEM", Usage: "the SYSTEM", Default: "linux"},
		"free":       {Name: "free", Arg: "TEXT", Usage: "a string with no name"},
		"json":       {Name: "json", Usage: "print JSON"},
		"config-dir": {Name: "config-dir", Arg: "DIR", Usage: "DIR of the files"},
	}
	for _, got := range FlagsOf(fs) {
		w := want[got.Name]
		if got.Name != w.Name || got.Arg != w.Arg || got.Usage != w.Usage || got.Default != w.Default || strings.Join(got.Values.Words, ",") != strings.Join(w.Values.Words, ",") {
			t.Errorf("FlagOf(--%s) = %+v, want %+v", got.Name, got, w)
		}
	}
	var b strings.Builder
	WriteFlags(&b, FlagsOf(fs))
	if !strings.Contains(b.String(), "  --streams N\n        connections (default 8)\n") {
		t.Errorf("WriteFlags:\n%s", b.String())
	}
}

func TestParseErrorUsesTwoDashesAndSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "unknown flag --bogus"},
		{[]string{"--dry-rn"}, "unknown flag --dry-rn (did you mean --dry-run?)"},
		{[]string{"--streams"}, "flag --streams needs a value"},
		{[]string{"--streams", "x"}, `invalid value "x" for --streams: parse error`},
		{[]string{"--dry-run=x"}, `invalid boolean value "x" for --dry-run: parse error`},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Bool("dry-run", false, "")
		fs.Int("streams", 8, "")
		err := fs.Parse(tc.args)
		if err == nil {
			t.Fatalf("%v parsed", tc.args)
		}
		if got := ParseError(fs, err).Error(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	other := errors.New("something else")
	if ParseError(flag.NewFlagSet("x", flag.ContinueOnError), other) != other {
		t.Error("an error that is not the flag package's must pass unchanged")
	}
}
