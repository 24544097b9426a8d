// SPDX-License-Identifier: Apache-2.0

// Package clidoc renders a command-line program's command table, the one
// `--help` prints, as shell completion scripts (bash, zsh, fish) and as a
// manual page (man(7) roff). The program describes itself once, as a
// [Program]; every rendering is generated from that, so a new command or
// flag reaches the completions and the manual without anyone editing them.
package clidoc

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Program is a command-line program as its help describes it.
type Program struct {
	// Name is the executable's name, e.g. "macake".
	Name string
	// Summary is the one-line description (the man page's NAME line).
	Summary string
	// Synopsis is the usage line after the name, e.g. "[--config-dir DIR]
	// COMMAND [flags]".
	Synopsis string
	// Description is the man page's DESCRIPTION, paragraphs separated by a
	// blank line.
	Description string
	// Globals are the flags accepted before (and after) every command.
	Globals []Flag
	// Commands are the subcommands, in the order help lists them.
	Commands []Command
	// Sections are further man page sections (EXIT STATUS, ENVIRONMENT,
	// FILES, SEE ALSO), in order.
	Sections []Section
	// PolicyDir tells the scripts where policy names come from (Kind
	// Policies).
	PolicyDir PolicySource
}

// Command is one subcommand.
type Command struct {
	Name string
	// Aliases are other names that run it (completed, listed in the man
	// page), e.g. "plan" for "apply --dry-run".
	Aliases []string
	// Args is the synopsis after the name; Short the one-line summary;
	// Long the paragraphs of `COMMAND --help`.
	Args, Short, Long string
	Flags             []Flag
	// Operands completes the positional arguments: fixed words (Words) or
	// files.
	Operands Completion
	// Hidden commands are run by name but neither completed nor listed.
	Hidden bool
}

// Flag is one flag.
type Flag struct {
	// Name is the flag without dashes, e.g. "dry-run".
	Name string
	// Arg names its value in help, e.g. "DIR"; "" for a boolean flag.
	Arg string
	// Usage is the help text; Default the default value, "" for none.
	Usage, Default string
	// Values completes the flag's value.
	Values Completion
}

// Completion says how a value or an operand is completed.
type Completion struct {
	// Words are the fixed choices, e.g. "auto", "always", "never".
	Words []string
	// Kind completes from the file system or the program's own data.
	Kind Kind
}

// Kind is a source of completions other than fixed words.
type Kind int

// The completion kinds.
const (
	// None completes nothing (a free value: a rate, a URL).
	None Kind = iota
	// Files completes file names.
	Files
	// Dirs completes directory names.
	Dirs
	// Policies completes the names of the policy files (NAME for
	// NAME.toml) in the directory Program.PolicyDir says.
	Policies
)

// Section is a further man page section: a title and paragraphs. A
// paragraph whose first line is "TAG\tTEXT" lines is rendered as a tagged
// list (one .TP per line).
type Section struct {
	Title string
	Body  string
}

// PolicySource tells the scripts where the policy names are: the global
// flag naming the directory (without dashes), and the directory without
// it. Set it when any Completion has Kind Policies.
type PolicySource struct {
	Flag, DefaultDir string
}

// visible returns the commands to complete and list.
func (p Program) visible() []Command {
	var out []Command
	for _, c := range p.Commands {
		if !c.Hidden {
			out = append(out, c)
		}
	}
	return out
}

// names returns every command name and alias to complete, sorted.
func (p Program) names() []string {
	var names []string
	for _, c := range p.visible() {
		names = append(names, c.Name)
		names = append(names, c.Aliases...)
	}
	sort.Strings(names)
	return names
}

// valued returns the flags of fs that take a value.
func valued(fs []Flag) []Flag {
	var out []Flag
	for _, f := range fs {
		if f.Arg != "" {
			out = append(out, f)
		}
	}
	return out
}

// dashed returns the flags as "--name", sorted.
func dashed(fs []Flag) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, "--"+f.Name)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// firstSentence shortens a help text to its first clause, for the short
// descriptions zsh and fish show beside each candidate.
func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	for _, sep := range []string{". ", "; ", " (", ": "} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	s = strings.TrimSuffix(s, ".")
	if len(s) > 70 {
		s = s[:67] + "..."
	}
	return s
}

// check reports a Program the renderings cannot express: a command or
// flag without a name, or a Policies completion without a source.
func (p Program) check() error {
	for _, c := range p.Commands {
		if c.Name == "" {
			return fmt.Errorf("clidoc: a command without a name")
		}
		for _, f := range c.Flags {
			if f.Name == "" {
				return fmt.Errorf("clidoc: %s: a flag without a name", c.Name)
			}
			if f.Values.Kind == Policies && p.PolicyDir.DefaultDir == "" {
				return fmt.Errorf("clidoc: %s --%s completes policies, but Program.PolicyDir is not set", c.Name, f.Name)
			}
		}
	}
	return nil
}
