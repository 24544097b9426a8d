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
// an empty string (as units.Rate's "0bit").
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
	fs.String("out", "", "write to `FILE`")
	fs.String("log-file", "", "log to `PATH`")
	want := map[string]Flag{
		"download":   {Name: "download", Arg: "RATE", Usage: "base rate (default: \"auto\")"},
		"color":      {Name: "color", Arg: "auto|never", Usage: "when to colour", Default: "auto", Values: Completion{Words: []string{"auto", "never"}}},
		"streams":    {Name: "streams", Arg: "N", Usage: "connections", Default: "8"},
		"workers":    {Name: "workers", Arg: "N", Usage: "parallel runs"},
		"target":     {Name: "target", Arg: "SYSTEM", Usage: "the SYSTEM", Default: "linux"},
		"free":       {Name: "free", Arg: "TEXT", Usage: "a string with no name"},
		"json":       {Name: "json", Usage: "print JSON"},
		"config-dir": {Name: "config-dir", Arg: "DIR", Usage: "DIR of the files", Values: Completion{Kind: Dirs}},
		"out":        {Name: "out", Arg: "FILE", Usage: "write to FILE", Values: Completion{Kind: Files}},
		"log-file":   {Name: "log-file", Arg: "PATH", Usage: "log to PATH", Values: Completion{Kind: Files}},
	}
	for _, got := range FlagsOf(fs) {
		w := want[got.Name]
		if got.Name != w.Name || got.Arg != w.Arg || got.Usage != w.Usage || got.Default != w.Default || !sameCompletion(got.Values, w.Values) {
			t.Errorf("FlagOf(--%s) = %+v, want %+v", got.Name, got, w)
		}
	}
	var b strings.Builder
	WriteFlags(&b, FlagsOf(fs))
	if !strings.Contains(b.String(), "  --streams N\n        connections (default 8)\n") {
		t.Errorf("WriteFlags:\n%s", b.String())
	}
}

func sameCompletion(a, b Completion) bool {
	return a.Kind == b.Kind && strings.Join(a.Words, ",") == strings.Join(b.Words, ",")
}

// TestHintsComeBeforeTheFlagsOwnCompletion: a hint for "COMMAND --FLAG"
// wins over one for "--FLAG", which wins over what FlagOf finds; a
// boolean completes nothing whatever the hints say.
func TestHintsComeBeforeTheFlagsOwnCompletion(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c := color("auto")
	fs.Var(&c, "color", "when to colour")
	fs.String("link", "", "the `NAME`")
	fs.String("out", "", "write to `FILE`")
	fs.Bool("json", false, "print JSON")
	h := Hints{Values: map[string]Completion{
		"sim --link": {Words: []string{"starlink"}},
		"--link":     {Kind: Policies},
		"--color":    {Words: []string{"never"}},
		"--json":     {Kind: Files},
	}}
	for _, tc := range []struct {
		cmd  string
		want map[string]Completion
	}{
		{"sim", map[string]Completion{"link": {Words: []string{"starlink"}}, "color": {Words: []string{"never"}}, "out": {Kind: Files}}},
		{"apply", map[string]Completion{"link": {Kind: Policies}, "color": {Words: []string{"never"}}, "out": {Kind: Files}}},
	} {
		for _, got := range h.Flags(tc.cmd, fs) {
			if w := tc.want[got.Name]; !sameCompletion(got.Values, w) {
				t.Errorf("%s --%s completes %+v, want %+v", tc.cmd, got.Name, got.Values, w)
			}
		}
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
