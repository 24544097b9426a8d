// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/internal/clidoc"
	"github.com/macake/macake/internal/suggest"
)

// Default locations; --config-dir and --state-dir override them.
const defaultConfigDir = config.DefaultConfigDir

var defaultStateDir = settings.DefaultStateDir

// env is everything a command may touch of the outside world, so that the
// whole CLI runs in-process in tests.
type env struct {
	ctx       context.Context
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	getenv    func(string) string
	configDir string
	stateDir  string
	// configDirSet tells whether --config-dir was given explicitly.
	configDirSet bool
	// euid reports the effective user id; tests replace it.
	euid func() int
	// invokedAs is the command the user typed when it runs another's code
	// (plan runs apply --dry-run), so help and messages name what was run.
	invokedAs *command
	// flagSink, when set, receives the command's flags instead of having
	// them parsed, and the command stops there: how the completions and
	// the manual learn the flags from the commands themselves (flagsOf).
	flagSink func(fs *flag.FlagSet)
}

// invocation is how the person ran macake: the directories every command
// a message names must repeat.
func (e *env) invocation() config.Invocation {
	var i config.Invocation
	if e.configDir != defaultConfigDir {
		i.ConfigDir = e.configDir
	}
	if e.stateDir != defaultStateDir {
		i.StateDir = e.stateDir
	}
	return i
}

// command is one subcommand: its help texts and the function that runs it.
type command struct {
	name  string
	args  string // synopsis after the name, e.g. "[--dry-run] [--json]"
	short string // one line for the command list
	long  string // paragraph(s) for `macake COMMAND --help`
	run   func(e *env, args []string) int
}

// commands is the command tree, in the order `macake --help` lists it.
var commands []*command

func init() {
	commands = []*command{
		initCmd, validateCmd, planCmd, applyCmd, downCmd, watchCmd, pauseCmd, resumeCmd, statusCmd, linksCmd, doctorCmd, selftestCmd,
		measureCmd, monitorCmd, benchCmd, simCmd,
		installDaemonCmd, uninstallDaemonCmd, installAgentCmd, uninstallAgentCmd,
		bugreportCmd, completionCmd, manCmd, versionCmd,
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run is the whole CLI: it parses the global flags, dispatches to the
// subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, euid: os.Geteuid}
	return e.main(args)
}

func (e *env) main(args []string) int {
	fs := flag.NewFlagSet("macake", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&e.configDir, "config-dir", defaultConfigDir, "directory of policy files (*.toml)")
	fs.StringVar(&e.stateDir, "state-dir", defaultStateDir, "directory of the state file")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.BoolVar(showVersion, "V", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			e.usage(e.stdout)
			return exitcode.OK
		}
		fmt.Fprintf(e.stderr, "macake: %v\n", clidoc.ParseError(fs, err))
		fmt.Fprintln(e.stderr, "Run 'macake --help' for usage.")
		return exitcode.Usage
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "config-dir" {
			e.configDirSet = true
		}
	})
	if *showVersion {
		return versionCmd.run(e, nil)
	}
	return e.dispatch(fs.Args())
}

// dispatch runs the command rest names (after the global flags).
func (e *env) dispatch(rest []string) int {
	if len(rest) == 0 {
		// What to type next, as --help says it: a bare name is no command.
		e.usage(e.stderr)
		return exitcode.Usage
	}
	name := rest[0]
	if name == "help" {
		if len(rest) > 1 {
			if c := lookup(rest[1]); c != nil {
				c.help(e.stdout, nil)
				return exitcode.OK
			}
			e.unknownCommand(rest[1])
			return exitcode.Usage
		}
		e.usage(e.stdout)
		return exitcode.OK
	}
	c := lookup(name)
	if c == nil {
		e.unknownCommand(name)
		return exitcode.Usage
	}
	return c.run(e, rest[1:])
}

// unknownCommand says that name is no command, and which it was probably
// meant to be.
func (e *env) unknownCommand(name string) {
	msg := fmt.Sprintf("macake: unknown command %q", name)
	if s := suggest.Closest(name, commandNames()); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	fmt.Fprintln(e.stderr, msg)
	fmt.Fprintln(e.stderr, "Run 'macake --help' for the commands.")
}

// commandNames are the names of every command, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		names = append(names, c.name)
	}
	sort.Strings(names)
	return names
}

// summary is macake in one line: the first line of --help and the
// manual's NAME.
const summary = "latency-driven adaptive bandwidth shaping, declaratively"

func (e *env) usage(w io.Writer) {
	fmt.Fprintf(w, "macake: %s.\n", summary)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: macake [--config-dir DIR] [--state-dir DIR] COMMAND [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-18s %s\n", c.name, c.short)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Global flags:\n  --config-dir DIR   policy files (default %s)\n  --state-dir DIR    state file directory (default %s)\n", defaultConfigDir, defaultStateDir)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'macake COMMAND --help' for a command's flags.")
}

func (c *command) help(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: macake %s %s\n\n%s\n", c.name, c.args, c.short)
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.long))
	}
	if fs != nil {
		if flags := clidoc.FlagsOf(fs); len(flags) > 0 {
			fmt.Fprintf(w, "\nFlags:\n")
			clidoc.WriteFlags(w, flags)
		}
	}
}

// durationVar defines a duration flag read as policy files read durations
// (units.Duration): one grammar and one error text for files and flags,
// so `--drift-interval 5` says it needs a unit as `probe_interval = 5`
// does, where Go's own duration flag said only "parse error".
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*units.Duration)(p), name, usage)
}

// flags returns a FlagSet for c whose errors the caller maps to exitcode.Usage.
func (c *command) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("macake "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses args into fs. It returns done=true with the exit code when the
// command must stop: after --help (0) or on a usage error (64).
func (c *command) parse(e *env, fs *flag.FlagSet, args []string) (done bool, code int) {
	if e.flagSink != nil {
		e.flagSink(fs)
		return true, exitcode.OK
	}
	// The global flags also work after the command name
	// (`macake validate --config-dir DIR`), as people type them.
	if fs.Lookup("config-dir") == nil {
		fs.Func("config-dir", "`DIR` of the policy files (global flag)", func(s string) error {
			e.configDir, e.configDirSet = s, true
			return nil
		})
	}
	if fs.Lookup("state-dir") == nil {
		fs.Func("state-dir", "`DIR` of the state file (global flag)", func(s string) error {
			e.stateDir = s
			return nil
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.help(e.stdout, fs)
			return true, exitcode.OK
		}
		fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, clidoc.ParseError(fs, err))
		fmt.Fprintf(e.stderr, "Run 'macake %s --help' for usage.\n", c.name)
		return true, exitcode.Usage
	}
	return false, exitcode.OK
}

// parseInterspersed is parse for a command whose operands may come before
// its flags (`macake init home --download 250mbit`): Go's flag package
// stops at the first operand, so parsing goes on after each one. It
// returns the operands in order.
func (c *command) parseInterspersed(e *env, fs *flag.FlagSet, args []string) (done bool, code int, operands []string) {
	for {
		if done, code := c.parse(e, fs, args); done {
			return true, code, nil
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return false, exitcode.OK, operands
		}
		if rest[0] == "--" {
			return false, exitcode.OK, append(operands, rest[1:]...)
		}
		operands, args = append(operands, rest[0]), rest[1:]
	}
}

// parseNoArgs is parse for a command that takes no operands: it also
// rejects positional arguments.
func (c *command) parseNoArgs(e *env, fs *flag.FlagSet, args []string) (done bool, code int) {
	if done, code := c.parse(e, fs, args); done {
		return true, code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "macake %s: unexpected argument %q\n", c.name, fs.Arg(0))
		return true, exitcode.Usage
	}
	return false, exitcode.OK
}

// requireRoot prints the standard hint and returns exitcode.NoPerm unless root.
func (e *env) requireRoot(name string) (ok bool, code int) {
	what := "change pf/dummynet"
	if backend, err := backend.Choose(hostGOOS, e.getenv); err == nil && backend == "tc" {
		what = "change the interfaces' qdiscs (tc)"
	}
	return e.requireRootTo(name, what)
}

// requireRootTo is requireRoot for a command that needs root to do what.
func (e *env) requireRootTo(name, what string) (ok bool, code int) {
	if e.euid() == 0 {
		return true, exitcode.OK
	}
	fmt.Fprintf(e.stderr, "macake %s: needs root to %s. Run with sudo.\n", name, what)
	return false, exitcode.NoPerm
}
