// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/execrun"
)

// shell runs a script in a real shell, or skips the test when the shell
// is not installed.
func shell(t *testing.T, sh, script string, args ...string) string {
	t.Helper()
	path, err := lookTool(sh)
	if err != nil {
		t.Skipf("skipping: %s is not installed (apt-get install %s)", sh, sh)
	}
	res, err := execrun.Exec{}.Run(context.Background(), execrun.Command{Argv: append([]string{path}, args...), Stdin: script})
	if err != nil {
		t.Fatalf("%s: %v", sh, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s exited %d:\n%s\n%s", sh, res.ExitCode, res.Stderr, script)
	}
	return string(res.Stdout)
}

// lookTool finds a program in the usual directories (tests may run with a
// short PATH).
func lookTool(name string) (string, error) {
	for _, dir := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/bin", "/bin", "/usr/local/bin") {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

func completionScript(t *testing.T, sh string) string {
	t.Helper()
	code, out, stderr := runCLI(t, "completion", sh)
	if code != exitcode.OK || out == "" {
		t.Fatalf("macake completion %s: exit %d, stderr %q", sh, code, stderr)
	}
	return out
}

// TestCompletionBashCompletesInARealBash drives the generated function as
// bash's programmable completion does: COMP_WORDS and COMP_CWORD set, the
// function called, COMPREPLY read.
func TestCompletionBashCompletesInARealBash(t *testing.T) {
	script := completionScript(t, "bash")
	dir := t.TempDir()
	file := filepath.Join(dir, "macake.bash")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	shell(t, "bash", "", "-n", file)
	policies := filepath.Join(dir, "links.d")
	os.Mkdir(policies, 0o755)
	for _, n := range []string{"home.toml", "tether.toml", "notes.txt"} {
		os.WriteFile(filepath.Join(policies, n), nil, 0o644)
	}
	saved := filepath.Join(dir, "reviewed.plan")
	os.WriteFile(saved, nil, 0o600)
	for _, tc := range []struct {
		line string // what is typed; the last word is completed
		want []string
	}{
		{"macake ap", []string{"apply"}},
		{"macake p", []string{"pause", "plan"}},
		{"macake com", []string{"completion"}},
		{"macake completion ", []string{"bash", "fish", "zsh"}},
		{"macake --config-dir /tmp va", []string{"validate"}},
		{"macake apply --dr", []string{"--dry-run"}},
		{"macake plan --det", []string{"--detailed-exitcode"}},
		{"macake apply --color ", []string{"always", "auto", "never"}},
		{"macake sim --link ", []string{"cable", "dsl", "lte", "starlink"}},
		{"macake --config-dir " + policies + " measure --link ", []string{"home", "tether"}},
		{"macake help ins", []string{"install-agent", "install-daemon"}},
		{"macake --ver", []string{"--version"}},
		{"macake status --j", []string{"--json"}},
		{"macake apply " + filepath.Join(dir, "rev"), []string{saved}}, // a saved plan
		{"macake plan --out " + filepath.Join(dir, "rev"), []string{saved}},
	} {
		words := strings.Fields(tc.line)
		if strings.HasSuffix(tc.line, " ") {
			words = append(words, "")
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, shellQuote(w))
		}
		drive := "source " + shellQuote(file) + "\n" +
			"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
			"COMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n" +
			"_macake\n" +
			`printf '%s\n' "${COMPREPLY[@]}"` + "\n"
		got := strings.Fields(shell(t, "bash", drive))
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("completing %q: %q, want %q", tc.line, got, tc.want)
		}
	}
}

// shellQuote quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestCompletionEveryCommandAndFlag: the scripts name every command of
// the table and every flag each command defines, so a new one cannot be
// left out.
func TestCompletionEveryCommandAndFlag(t *testing.T) {
	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		scripts[sh] = completionScript(t, sh)
	}
	for _, c := range commands {
		for sh, s := range scripts {
			if !strings.Contains(s, c.name) {
				t.Errorf("%s completion lacks command %s", sh, c.name)
			}
		}
		flagsOf(c).VisitAll(func(f *flag.Flag) {
			for sh, s := range scripts {
				if !strings.Contains(s, "--"+f.Name) && !strings.Contains(s, "-l "+f.Name) {
					t.Errorf("%s completion lacks %s --%s", sh, c.name, f.Name)
				}
			}
		})
	}
}

func TestCompletionZshAndFishParse(t *testing.T) {
	t.Run("zsh", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "_macake")
		os.WriteFile(file, []byte(completionScript(t, "zsh")), 0o644)
		shell(t, "zsh", "", "-n", file)
	})
	t.Run("fish", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "macake.fish")
		os.WriteFile(file, []byte(completionScript(t, "fish")), 0o644)
		shell(t, "fish", "", "-n", file)
		// fish's own completer, asked for the candidates of a line.
		got := shell(t, "fish", "source "+shellQuote(file)+"\ncomplete -C 'macake apply --col'\ncomplete -C 'macake apply --color '\n")
		for _, want := range []string{"--color", "auto", "always", "never"} {
			if !strings.Contains(got, want) {
				t.Errorf("fish completes %q; want %q among them", got, want)
			}
		}
	})
}

func TestCompletionUsage(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		if code, _, stderr := runCLI(t, args...); code != exitcode.Usage || stderr == "" {
			t.Errorf("macake %v: exit %d, stderr %q; want 64 and a message", args, code, stderr)
		}
	}
}

// TestManPage: the page lints clean with mandoc (warnings and errors;
// style notes aside), renders with man -l, and documents every command
// and flag of the table.
func TestManPage(t *testing.T) {
	code, page, stderr := runCLI(t, "man", "--date", "January 2, 2026")
	if code != exitcode.OK {
		t.Fatalf("macake man: exit %d, %s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "macake.1")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("mandoc lint", func(t *testing.T) {
		if _, err := lookTool("mandoc"); err != nil {
			t.Skip("skipping: mandoc is not installed (apt-get install mandoc)")
		}
		path, _ := lookTool("mandoc")
		res, err := execrun.Exec{}.Run(context.Background(), execrun.Command{Argv: []string{path, "-T", "lint", "-W", "warning", file}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || len(res.Stdout)+len(res.Stderr) > 0 {
			t.Errorf("mandoc -T lint (exit %d):\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	t.Run("man -l", func(t *testing.T) {
		if _, err := lookTool("man"); err != nil {
			t.Skip("skipping: man is not installed (apt-get install man-db)")
		}
		path, _ := lookTool("man")
		res, err := (execrun.Exec{Env: []string{"MANWIDTH=80", "MAN_KEEP_FORMATTING=0"}}).Run(context.Background(), execrun.Command{Argv: []string{path, "-l", "-P", "cat", file}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("man -l: %v %d %s", err, res.ExitCode, res.Stderr)
		}
		// man's pager-less output still overstrikes bold and underlined
		// text (X\bX, _\bX); read it as plain text.
		text := regexp.MustCompile(`.\x08`).ReplaceAllString(string(res.Stdout), "")
		text = strings.Join(strings.Fields(text), " ")
		for _, want := range []string{"NAME", "SYNOPSIS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "FILES", "January 2, 2026"} {
			if !strings.Contains(text, want) {
				t.Errorf("rendered page lacks %q", want)
			}
		}
		for _, c := range commands {
			if !strings.Contains(text, "macake "+c.name) {
				t.Errorf("rendered page lacks command %s", c.name)
			}
			flagsOf(c).VisitAll(func(f *flag.Flag) {
				if !strings.Contains(text, "--"+f.Name) {
					t.Errorf("rendered page lacks %s --%s", c.name, f.Name)
				}
			})
		}
	})
}
