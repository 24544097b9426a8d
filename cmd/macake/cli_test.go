// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/internal/docsite"
)

// runCLI runs the CLI in-process and returns exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCLIUsageErrorsExit64(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"no-such-command"},
		{"--no-such-flag", "version"},
		{"version", "--no-such-flag"},
		{"version", "extra"},
		{"help", "no-such-command"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != exitcode.Usage {
			t.Errorf("macake %v: exit %d, want %d (stderr %q)", args, code, exitcode.Usage, stderr)
		}
		if stderr == "" {
			t.Errorf("macake %v: no message on stderr", args)
		}
	}
}

func TestCLIHelpForEveryCommand(t *testing.T) {
	for _, c := range commands {
		code, stdout, _ := runCLI(t, c.name, "--help")
		if code != exitcode.OK || !strings.Contains(stdout, "Usage: macake "+c.name) {
			t.Errorf("macake %s --help: exit %d, stdout %q", c.name, code, stdout)
		}
		code, stdout, _ = runCLI(t, "help", c.name)
		if code != exitcode.OK || !strings.Contains(stdout, c.short) {
			t.Errorf("macake help %s: exit %d, stdout %q", c.name, code, stdout)
		}
	}
	code, stdout, _ := runCLI(t, "--help")
	if code != exitcode.OK || !strings.Contains(stdout, "Commands:") {
		t.Errorf("macake --help: exit %d, stdout %q", code, stdout)
	}
}

func TestCLIVersion(t *testing.T) {
	code, stdout, _ := runCLI(t, "version")
	if code != exitcode.OK || !strings.HasPrefix(stdout, "macake ") {
		t.Fatalf("version: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runCLI(t, "version", "--json")
	if code != exitcode.OK || !strings.Contains(stdout, `"go_version"`) {
		t.Fatalf("version --json: exit %d, stdout %q", code, stdout)
	}
}

// TestCLIDurationFlagsShareTheConfigGrammar checks that every duration flag
// reads its value as policy files do, with the same error text, and keeps
// accepting 0 where 0 means something.
func TestCLIDurationFlagsShareTheConfigGrammar(t *testing.T) {
	tests := []struct {
		cmd, flag string
		zeroOK    bool // 0 has a meaning ("the default", "no delay", "until interrupted")
	}{
		{"watch", "drift-interval", false},
		{"monitor", "interval", true},
		{"monitor", "every", false},
		{"monitor", "duration", true},
		{"bench", "duration", false},
		{"bench", "idle", false},
		{"bench", "settle", true},
		{"bench", "lost-delay", false},
		{"measure", "duration", false},
		{"measure", "idle", false},
		{"sim", "duration", false},
		{"init", "duration", false},
		{"init", "idle", false},
		{"sim", "buffer", true},
		{"sim", "base-rtt", true},
		{"sim", "offset", true},
		{"sim", "actuation-delay", true},
		{"sim", "warmup", true},
		{"sim", "rebin", true},
		{"sim", "lost-delay", true},
		{"pause", "for", false},
	}
	_, fileErr := units.ParseDuration("5")
	listed := map[string]bool{}
	for _, tc := range tests {
		listed[tc.cmd+" --"+tc.flag] = true
		code, _, stderr := runCLI(t, tc.cmd, "--"+tc.flag, "5")
		if code != exitcode.Usage || !strings.Contains(stderr, fileErr.Error()) {
			t.Errorf("macake %s --%s 5: exit %d, stderr %q; want %d and %q", tc.cmd, tc.flag, code, stderr, exitcode.Usage, fileErr)
		}
		if code, _, stderr := runCLI(t, tc.cmd, "--"+tc.flag, "-1s"); code != exitcode.Usage || !strings.Contains(stderr, "must not be negative") {
			t.Errorf("macake %s --%s -1s: exit %d, stderr %q", tc.cmd, tc.flag, code, stderr)
		}
		// --help after the flag stops before the command runs, once the
		// flag has been read.
		if code, stdout, stderr := runCLI(t, tc.cmd, "--"+tc.flag, "250ms", "--help"); code != exitcode.OK || !strings.Contains(stdout, "--"+tc.flag) {
			t.Errorf("macake %s --%s 250ms: exit %d, stderr %q", tc.cmd, tc.flag, code, stderr)
		}
		if tc.zeroOK {
			if code, _, stderr := runCLI(t, tc.cmd, "--"+tc.flag, "0", "--help"); code != exitcode.OK {
				t.Errorf("macake %s --%s 0: exit %d, stderr %q", tc.cmd, tc.flag, code, stderr)
			}
		}
	}
	// Every flag --help calls a duration is in the table above.
	for _, c := range commands {
		_, stdout, _ := runCLI(t, c.name, "--help")
		for _, line := range strings.Split(stdout, "\n") {
			if name, ok := strings.CutSuffix(strings.TrimSpace(line), " DURATION"); ok && strings.HasPrefix(name, "--") && !listed[c.name+" "+name] {
				t.Errorf("macake %s %s is a duration flag the test does not check", c.name, name)
			}
		}
	}
}

// TestRequireRootNamesTheBackend: the refusal says what needs root on this
// system: pf/dummynet on a Mac, the qdiscs on Linux.
func TestRequireRootNamesTheBackend(t *testing.T) {
	for goos, want := range map[string]string{"darwin": "pf/dummynet", "linux": "the interfaces' qdiscs (tc)"} {
		old := hostGOOS
		hostGOOS = goos
		var errb bytes.Buffer
		e := &env{stderr: &errb, getenv: func(string) string { return "" }, euid: func() int { return 501 }}
		ok, code := e.requireRoot("apply")
		hostGOOS = old
		if ok || code != exitcode.NoPerm || !strings.Contains(errb.String(), "needs root to change "+want) {
			t.Errorf("%s: %v %d %q", goos, ok, code, errb.String())
		}
	}
}

// TestCLIPlanIsACommand checks that `plan` is listed wherever commands are
// and that its help names it, not apply (issue 12, item 10).
func TestCLIPlanIsACommand(t *testing.T) {
	_, stdout, _ := runCLI(t, "--help")
	if !strings.Contains(stdout, "\n  plan ") {
		t.Errorf("macake --help does not list plan:\n%s", stdout)
	}
	_, _, stderr := runCLI(t)
	if !strings.Contains(stderr, "\n  plan ") {
		t.Errorf("the missing-command message does not list plan: %q", stderr)
	}
	for _, args := range [][]string{{"plan", "--help"}, {"help", "plan"}} {
		code, stdout, _ := runCLI(t, args...)
		if code != exitcode.OK || !strings.HasPrefix(stdout, "Usage: macake plan ") {
			t.Errorf("macake %v: exit %d, stdout %q", args, code, stdout)
		}
	}
	code, _, stderr := runCLI(t, "plan", "--no-such-flag")
	if code != exitcode.Usage || !strings.Contains(stderr, "macake plan --help") {
		t.Errorf("plan --no-such-flag: exit %d, stderr %q", code, stderr)
	}
}

// TestCLIEveryHelpHasAnExitStatus: scripts and launchd read the exit
// status, so every command's help says what each one means.
func TestCLIEveryHelpHasAnExitStatus(t *testing.T) {
	for _, c := range commands {
		_, stdout, _ := runCLI(t, c.name, "--help")
		stdout = strings.Join(strings.Fields(stdout), " ")
		if !strings.Contains(stdout, " Exit status: 0") {
			t.Errorf("macake %s --help has no exit-status section", c.name)
		}
		if !strings.Contains(stdout, "64 usage") {
			t.Errorf("macake %s --help does not name exit 64 (usage)", c.name)
		}
	}
}

// TestCLIFlagValuesAreUsageErrors: a flag value no run can use exits 64,
// before anything is measured, served or simulated (issue 12, item 16).
func TestCLIFlagValuesAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"measure", "--serve", ":99999"}, "invalid port"},
		{[]string{"measure", "--serve", "localhost"}, "missing port"},
		{[]string{"measure", "--server", "ftp://x"}, `--server "ftp://x": want a URL like http://HOST:PORT`},
		{[]string{"bench", "--server", "ftp://x"}, `--server "ftp://x": want a URL like http://HOST:PORT`},
		{[]string{"sim", "--link", "mars"}, `--link mars: unknown link model "mars"`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitcode.Usage || !strings.Contains(stderr, tc.want) {
			t.Errorf("macake %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitcode.Usage, tc.want)
		}
	}
}

// TestCLIBareNameShowsTheUsage: `macake` alone prints the usage, each
// command with what it does, where it used to list bare names (issue 27,
// item 11); it is still a usage error.
func TestCLIBareNameShowsTheUsage(t *testing.T) {
	code, stdout, stderr := runCLI(t)
	if code != exitcode.Usage || stdout != "" {
		t.Errorf("macake: exit %d, stdout %q; want %d and the usage on stderr", code, stdout, exitcode.Usage)
	}
	for _, c := range commands {
		if !strings.Contains(stderr, c.name) || !strings.Contains(stderr, c.short) {
			t.Errorf("macake: the usage lacks %s and its description:\n%s", c.name, stderr)
		}
	}
}

// TestCLISuggestsTheCommandMeant: a typo gets "did you mean" (issue 27,
// item 11); a name far from every command gets none.
func TestCLISuggestsTheCommandMeant(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"aply"}, `unknown command "aply"; did you mean "apply"?`},
		{[]string{"help", "stauts"}, `unknown command "stauts"; did you mean "status"?`},
		{[]string{"--config-dir", "/x", "valdiate"}, `did you mean "validate"?`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"` + "\n"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitcode.Usage || !strings.Contains(stderr, tc.want) {
			t.Errorf("macake %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitcode.Usage, tc.want)
		}
	}
}

// TestCLIFlagErrorsUseTheFormHelpShows: flag errors name flags with two
// dashes, as help and the docs do, and suggest the flag meant (issue 27,
// item 11).
func TestCLIFlagErrorsUseTheFormHelpShows(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "-bogus"}, "macake validate: unknown flag --bogus\n"},
		{[]string{"plan", "--detailed-exitcod"}, "unknown flag --detailed-exitcod (did you mean --detailed-exitcode?)"},
		{[]string{"--stat-dir", "/x", "status"}, "macake: unknown flag --stat-dir (did you mean --state-dir?)"},
		{[]string{"measure", "--streams"}, "flag --streams needs a value"},
		{[]string{"measure", "--streams", "many"}, `invalid value "many" for --streams: `},
		{[]string{"plan", "--json=maybe"}, `invalid boolean value "maybe" for --json: `},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitcode.Usage || !strings.Contains(stderr, tc.want) {
			t.Errorf("macake %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitcode.Usage, tc.want)
		}
		if strings.Contains(stderr, " -"+strings.TrimLeft(tc.args[len(tc.args)-1], "-")) && !strings.Contains(tc.want, "--") {
			t.Errorf("macake %v names a flag with one dash: %q", tc.args, stderr)
		}
	}
}

// TestCLIHelpNamesValuesAsTheSynopsisDoes: every flag's value has a name
// in capitals (or its choices), never Go's "value", "int" or "string",
// and a default is said once, never as a zero value (issue 27, item 11).
func TestCLIHelpNamesValuesAsTheSynopsisDoes(t *testing.T) {
	for _, c := range commands {
		_, stdout, _ := runCLI(t, c.name, "--help")
		for _, line := range strings.Split(stdout, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("macake %s --help says a default twice: %q", c.name, line)
			}
			for _, zero := range []string{"(default 0bit)", "(default 0B)", "(default 0s)", "(default 0)"} {
				if strings.Contains(line, zero) {
					t.Errorf("macake %s --help shows a zero default: %q", c.name, line)
				}
			}
			f := strings.Fields(line)
			if !strings.HasPrefix(line, "  --") || len(f) < 2 {
				continue
			}
			if arg := f[1]; arg != strings.ToUpper(arg) && !strings.Contains(arg, "|") {
				t.Errorf("macake %s --help: %s takes %q; name it in capitals as the synopsis does", c.name, f[0], arg)
			}
		}
	}
}

// TestCLIHelpSpeaksOfBothSystems: a help text that names macOS's objects
// (pf, dummynet, launchd) names Linux's too, and a one-line description
// names none without the other: the same binary runs on both (issue 27,
// item 12).
func TestCLIHelpSpeaksOfBothSystems(t *testing.T) {
	mac := regexp.MustCompile(`(?i)pfctl|dnctl|dummynet|pf anchor|pf reference|pf rules|pf\.conf|launchd`)
	linux := regexp.MustCompile(`Linux|\btc\b|systemd`)
	for _, c := range commands {
		if mac.MatchString(c.short) && !linux.MatchString(c.short) {
			t.Errorf("macake %s: the description names macOS's objects only: %q", c.name, c.short)
		}
		_, stdout, _ := runCLI(t, c.name, "--help")
		if m := mac.FindString(stdout); m != "" && !linux.MatchString(stdout) {
			t.Errorf("macake %s --help speaks of %q and never of Linux's counterpart", c.name, m)
		}
	}
}

// TestCLINamesNoFileOfTheSourceTree: the help, the manual and the
// completions point to the documentation's address, never to a file of
// a source tree the user of an installed binary does not have (issue 27,
// item 13).
func TestCLINamesNoFileOfTheSourceTree(t *testing.T) {
	tree := regexp.MustCompile(`(^|[^/\w])(docs/\S+|README\.md|examples/\S*|\.\./shared\S*|reference/\S+)`)
	texts := map[string]string{}
	for _, c := range commands {
		_, stdout, _ := runCLI(t, c.name, "--help")
		texts["macake "+c.name+" --help"] = stdout
	}
	_, texts["macake man"], _ = runCLI(t, "man")
	for name, text := range texts {
		text = strings.ReplaceAll(text, docsite.Docs, "DOCS/")
		if m := tree.FindString(text); m != "" {
			t.Errorf("%s names %q, a file of the source tree", name, strings.TrimSpace(m))
		}
	}
}
