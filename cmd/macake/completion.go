// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/internal/clidoc"
	"github.com/macake/macake/internal/docsite"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/systemd"
	"github.com/macake/macake/sim/linkmodel"
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
		return exitUsage
	}
	script, err := program().Completion(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.stderr, "macake completion: %v\n", err)
		return exitUsage
	}
	fmt.Fprint(e.stdout, script)
	return exitOK
}

func runMan(e *env, args []string) int {
	fs := manCmd.flags()
	date := fs.String("date", "", "the page's `DATE`, e.g. \"January 2, 2026\" (default: $SOURCE_DATE_EPOCH's, else today's), for a reproducible page")
	if done, code := manCmd.parse(e, fs, args); done {
		return code
	}
	if done, code := manCmd.noArgs(e, fs); done {
		return code
	}
	if *date == "" {
		*date = buildDate(e.getenv)
	}
	page, err := program().Man(clidoc.ManOptions{Section: "1", Date: *date, Source: "macake " + version, Manual: "User Commands"})
	if err != nil {
		fmt.Fprintf(e.stderr, "macake man: %v\n", err)
		return exitFailure
	}
	fmt.Fprint(e.stdout, page)
	return exitOK
}

// buildDate is the date a reproducible build stamps: SOURCE_DATE_EPOCH
// (reproducible-builds.org) when set, else today.
func buildDate(getenv func(string) string) string {
	t := time.Now()
	var secs int64
	if _, err := fmt.Sscan(getenv("SOURCE_DATE_EPOCH"), &secs); err == nil {
		t = time.Unix(secs, 0)
	}
	return t.UTC().Format("January 2, 2006")
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

// hints complete what no flag type knows: flag values and the commands'
// positional arguments.
var hints = clidoc.Hints{
	Values: map[string]clidoc.Completion{
		"sim --link":        {Words: linkmodel.Names},
		"sim --cc":          {Words: []string{"cubic", "reno"}},
		"sim --direction":   {Words: []string{"both", "download", "upload"}},
		"watch --log-level": {Words: []string{"debug", "info", "warn", "error"}},
		"--link":            {Kind: clidoc.Policies},
		"--mode":            {Words: modeNames()},
	},
	Operands: map[string]clidoc.Completion{
		"completion": {Words: clidoc.Shells},
		"apply":      {Kind: clidoc.Files}, // a saved plan
	},
}

func modeNames() []string {
	var out []string
	for _, m := range config.Modes {
		out = append(out, string(m))
	}
	return out
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
		Name:     "macake",
		Summary:  summary,
		Synopsis: "[--config-dir DIR] [--state-dir DIR] COMMAND [flags]",
		Description: `macake brings cake-autorate's latency-driven shaping to macOS (pf and dummynet)
and Linux (tc), declaratively. Each network link is described in one TOML
policy file in /etc/macake/links.d; macake makes the shaper match those
files with the least change, and 'macake watch' then steers the shaper's
rates in real time from measured latency, so the queue forms in the
machine's shaper instead of in the ISP's bloated buffer.

Output that is data is printed on standard output ('--json' where it
applies); progress and warnings go to standard error. Colour is used only
on a terminal without NO_COLOR.`,
		Globals:   hints.Flags("", globals),
		PolicyDir: clidoc.PolicySource{Flag: "config-dir", DefaultDir: defaultConfigDir},
	}
	for _, c := range commands {
		dc := clidoc.Command{Name: c.name, Args: c.args, Short: c.short, Long: c.long,
			Flags: hints.Flags(c.name, flagsOf(c)), Operands: hints.Operands[c.name]}
		p.Commands = append(p.Commands, dc)
	}
	p.Commands = append(p.Commands, clidoc.Command{Name: "help", Args: "[COMMAND]", Short: "Print the help of macake or of one command.",
		Operands: clidoc.Completion{Words: commandNames()}})

	var exits []string
	for _, x := range exitStatuses {
		exits = append(exits, fmt.Sprintf("%d\t%s", x.code, x.meaning))
	}
	env := []string{
		pfdn.EnvPfctl + "\tpath of pfctl (default " + pfdn.DefaultOptions().Pfctl + "); the tests point it at the emulator",
		pfdn.EnvDnctl + "\tpath of dnctl (default " + pfdn.DefaultOptions().Dnctl + ")",
		tc.EnvTC + ", " + tc.EnvIP + "\tpaths of tc and ip on Linux",
		backend.EnvBackend + "\tpf or tc: the shaping backend, instead of the one this system has",
		linkfacts.EnvFile + "\ta JSON file of link facts (interfaces, gateways, SSIDs) that replaces detection",
		"NO_COLOR\tno colour, even on a terminal",
	}
	files := []string{
		defaultConfigDir + "/NAME.toml\tthe policy of link NAME",
		settings.DaemonFile + "\tthe daemon settings (optional)",
		defaultStateDir + "/state.json\tthe state file: pipe slots, pf token, measured profiles",
		launchd.DaemonPlistPath + "\tthe LaunchDaemon that runs 'macake watch' (macOS)",
		launchd.DaemonLogPath + "\tthe daemon's log (macOS; on Linux the journal: journalctl -u " + systemd.UnitName + ")",
		systemd.UnitPath + "\tthe systemd unit that runs 'macake watch' (Linux)",
	}
	p.Sections = []clidoc.Section{
		{Title: "Exit status", Body: strings.Join(exits, "\n")},
		{Title: "Environment", Body: strings.Join(env, "\n")},
		{Title: "Files", Body: strings.Join(files, "\n")},
		{Title: "See also", Body: "pfctl(8), dnctl(8), pf.conf(5), tc(8), launchd(8), launchctl(1), systemd.service(5), systemctl(1)\n\nThe documentation, at " + docsite.Docs + ": CONFIG.md (every key of a policy file), USAGE.md, OPERATIONS.md (the daemon), LINUX.md (tc and systemd), TROUBLESHOOTING.md."},
	}
	return p
}
