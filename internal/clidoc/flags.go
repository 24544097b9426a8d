// SPDX-License-Identifier: Apache-2.0

package clidoc

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/macake/macake/internal/suggest"
)

// Placeholder is a flag value that names what it takes in help, e.g.
// "RATE" for a rate; a flag whose usage has a back-quoted name
// ("the `FILE` to write") uses that name instead.
type Placeholder interface{ Placeholder() string }

// Chooser is a flag value with a fixed set of values (--color): help
// shows them as its placeholder, and the completions offer them.
type Chooser interface{ Choices() []string }

// FlagOf describes one flag of a flag.FlagSet as help, the manual and the
// completions show it: its placeholder in capitals (never the type names
// Go's flag package prints, "value" or "int") and its default, left out
// when it is the type's zero value or the usage already says it. Its
// value completes with the choices its type lists (Chooser), else by its
// placeholder: directories for DIR (or a flag named *-dir), files for
// FILE… and PATH.
func FlagOf(f *flag.Flag) Flag {
	arg, usage := flag.UnquoteUsage(f)
	if !strings.Contains(f.Usage, "`") {
		arg = placeholder(f.Value, arg)
	}
	df := Flag{Name: f.Name, Arg: arg, Usage: usage}
	if !isZeroValue(f) && !strings.Contains(usage, "(default") {
		df.Default = f.DefValue
	}
	switch c, ok := f.Value.(Chooser); {
	case ok:
		df.Values = Completion{Words: c.Choices()}
	case arg == "":
		// A boolean takes no value.
	case arg == "DIR" || strings.HasSuffix(f.Name, "-dir"):
		df.Values = Completion{Kind: Dirs}
	case strings.HasPrefix(arg, "FILE") || arg == "PATH":
		df.Values = Completion{Kind: Files}
	}
	return df
}

// Hints complete what no flag type knows: a flag's value by "COMMAND
// --FLAG", else by "--FLAG" for every command (Values), and each
// command's operands by its name (Operands).
type Hints struct {
	Values   map[string]Completion
	Operands map[string]Completion
}

// Flags describes the flags of command cmd ("" for the global flags), as
// FlagsOf does, with the values h completes in place of FlagOf's.
func (h Hints) Flags(cmd string, fs *flag.FlagSet) []Flag {
	flags := FlagsOf(fs)
	for i, f := range flags {
		if f.Arg == "" {
			continue
		}
		if c, ok := h.Values[cmd+" --"+f.Name]; ok {
			flags[i].Values = c
		} else if c, ok := h.Values["--"+f.Name]; ok {
			flags[i].Values = c
		}
	}
	return flags
}

// FlagsOf describes every flag of fs, in fs's order (by name).
func FlagsOf(fs *flag.FlagSet) []Flag {
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) { out = append(out, FlagOf(f)) })
	return out
}

// placeholder names a value whose usage names none: what the value says
// of itself, its choices, else a name for Go's own types ("" for a
// boolean, which takes no value).
func placeholder(v flag.Value, goName string) string {
	switch p := v.(type) {
	case Placeholder:
		return p.Placeholder()
	case Chooser:
		return strings.Join(p.Choices(), "|")
	}
	switch goName {
	case "":
		return ""
	case "int", "uint":
		return "N"
	case "float":
		return "NUMBER"
	case "duration":
		return "DURATION"
	case "string":
		return "TEXT"
	}
	return "VALUE"
}

// isZeroValue reports whether f's default is its type's zero value, which
// goes without saying in help (as flag.PrintDefaults decides it).
func isZeroValue(f *flag.Flag) (zero bool) {
	switch f.DefValue {
	case "", "false", "0", "0s":
		return true
	}
	typ := reflect.TypeOf(f.Value)
	var z reflect.Value
	if typ.Kind() == reflect.Pointer {
		z = reflect.New(typ.Elem())
	} else {
		z = reflect.Zero(typ)
	}
	v, ok := z.Interface().(flag.Value)
	if !ok {
		return false
	}
	defer func() {
		if recover() != nil {
			zero = false // a String method that cannot handle its zero value
		}
	}()
	return f.DefValue == v.String()
}

// WriteFlags writes flags as `COMMAND --help` lists them: one
// "--name PLACEHOLDER" line each, then the usage and the default.
func WriteFlags(w io.Writer, flags []Flag) {
	for _, f := range flags {
		fmt.Fprintf(w, "  --%s", f.Name)
		if f.Arg != "" {
			fmt.Fprintf(w, " %s", f.Arg)
		}
		fmt.Fprintf(w, "\n        %s", f.Usage)
		if f.Default != "" {
			fmt.Fprintf(w, " (default %s)", f.Default)
		}
		fmt.Fprintln(w)
	}
}

// ParseError rewrites an error of fs.Parse in the form help and the docs
// use: flags with two dashes ("unknown flag --bogus", where Go's flag
// package says "flag provided but not defined: -bogus"), and the flag of
// fs an unknown one was probably meant to be.
func ParseError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		msg = "unknown flag --" + name
		if s := suggest.Closest(name, names); s != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", s)
		}
		return errors.New(msg)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("flag --%s needs a value", name)
	}
	for _, p := range []struct{ from, to string }{
		{" for flag -", " for --"}, // invalid value "x" for flag -name: …
		{" for -", " for --"},      // invalid boolean value "x" for -name: …
	} {
		if before, after, ok := strings.Cut(msg, p.from); ok {
			return errors.New(before + p.to + after)
		}
	}
	return err
}
