// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/cmd/macake/internal/manual"
	"github.com/macake/macake/internal/clidoc"
)

var completionCmd = &command{
	name:  "completion",
	args:  "bash|zsh|fish",
	short: "Print the shell completion script for bash, zsh or fish.",
	long: `Prints a script that completes macake's commands, their flags, the values
of flags that take a fixed set (--color, --mode), file and directory names,
and policy names for --link (from the policy directory, or the one given
with --config-dir). It is generated from the same table as --help, so it
knows every command of this build.

Load it for the current shell, or install it where the shell looks:

  bash:  source <(macake completion bash)
  zsh:   macake completion zsh > "${fpath[1]}/_macake"
  fish:  macake completion fish > ~/.config/fish/completions/macake.fish

Homebrew's directories are $(brew --prefix)/etc/bash_completion.d,
$(brew --prefix)/share/zsh/site-functions and
$(brew --prefix)/share/fish/vendor_completions.d.

Exit status: 0; 64 usage (no shell, or one macake has no script for).`,
}

var manCmd = &command{
	name:  "man",
	args:  "[--date DATE]",
	short: "Print the manual page macake(1) as roff ('macake man | man -l -' reads it).",
	long: `Prints the manual page, generated from the same table as --help: every
command with its help text and flags, the exit statuses, the environment
and the files macake uses. 'make man' writes it to bin/man/macake.1;
'make install' installs it.

Exit status: 0; 64 usage.`,
}

func init() {
	completionCmd.run = runCompletion
	manCmd.run = runMan
}

func runCompletion(e *env, args []string) int {
	fs := completionCmd.flags()
	if done, code := completionCmd.parse(e, fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(e.stderr, "macake completion: name one shell: %s\n", strings.Join(clidoc.Shells, ", "))
		return exitcode.Usage
	}
	script, err := program().Completion(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.stderr, "macake completion: %v\n", err)
		return exitcode.Usage
	}
	fmt.Fprint(e.stdout, script)
	return exitcode.OK
}

func runMan(e *env, args []string) int {
	fs := manCmd.flags()
	date := fs.String("date", "", "the page's `DATE`, e.g. \"January 2, 2026\" (default: $SOURCE_DATE_EPOCH's, else today's), for a reproducible page")
	if done, code := manCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	if *date == "" {
		*date = manual.Date(e.getenv)
	}
	page, err := program().Man(clidoc.ManOptions{Section: "1", Date: *date, Source: "macake " + version, Manual: "User Commands"})
	if err != nil {
		fmt.Fprintf(e.stderr, "macake man: %v\n", err)
		return exitcode.Failure
	}
	fmt.Fprint(e.stdout, page)
	return exitcode.OK
}

// flagsOf returns the flags c defines, by running it with a flag sink:
// every command defines its flags and then calls parse, which hands them
// over and stops the command before it does anything.
func flagsOf(c *command) *flag.FlagSet {
	var got *flag.FlagSet
	e := &env{ctx: nil, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard,
		getenv: func(string) string { return "" }, euid: os.Geteuid,
		flagSink: func(fs *flag.FlagSet) { got = fs }}
	c.run(e, nil)
	if got == nil {
		got = c.flags()
	}
	return got
}

// program describes macake for the completions and the manual: the
// command table, each command's flags as it defines them, and the facts
// the manual lists (exit statuses, environment, files).
func program() clidoc.Program {
	globals := flag.NewFlagSet("macake", flag.ContinueOnError)
	var s string
	var b bool
	globals.StringVar(&s, "config-dir", defaultConfigDir, "directory of the policy files (`DIR`/*.toml)")
	globals.StringVar(&s, "state-dir", defaultStateDir, "directory of the state file (`DIR`)")
	globals.BoolVar(&b, "version", false, "print the version and exit")
	p := clidoc.Program{
		Name:        "macake",
		Summary:     summary,
		Synopsis:    "[--config-dir DIR] [--state-dir DIR] COMMAND [flags]",
		Description: manual.Description,
		Globals:     manual.Hints.Flags("", globals),
		PolicyDir:   clidoc.PolicySource{Flag: "config-dir", DefaultDir: defaultConfigDir},
	}
	for _, c := range commands {
		dc := clidoc.Command{Name: c.name, Args: c.args, Short: c.short, Long: c.long,
			Flags: manual.Hints.Flags(c.name, flagsOf(c)), Operands: manual.Hints.Operands[c.name]}
		p.Commands = append(p.Commands, dc)
	}
	p.Commands = append(p.Commands, clidoc.Command{Name: "help", Args: "[COMMAND]", Short: "Print the help of macake or of one command.",
		Operands: clidoc.Completion{Words: commandNames()}})

	p.Sections = manual.Sections(defaultConfigDir, defaultStateDir)
	return p
}
