// SPDX-License-Identifier: Apache-2.0

package execrun

import (
	"context"
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRunCapturesOutputAndExitCode(t *testing.T) {
	cmd := Command{Argv: []string{"/bin/sh", "-c", `cat; echo "$LC_ALL" >&2; exit 3`}, Stdin: "hello"}
	res, err := Exec{}.Run(context.Background(), cmd)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if string(res.Stdout) != "hello" || strings.TrimSpace(string(res.Stderr)) != "C" || res.ExitCode != 3 {
		t.Fatalf("got stdout %q stderr %q exit %d; want hello, C, 3", res.Stdout, res.Stderr, res.ExitCode)
	}
	_, err = Check(cmd, res, nil)
	var ee *Error
	if !errors.As(err, &ee) || ee.ExitCode != 3 {
		t.Fatalf("Check: got %v, want *Error with exit 3", err)
	}
	if !strings.Contains(err.Error(), "/bin/sh -c") || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), ": C") {
		t.Errorf("error text lacks argv, status or stderr: %q", err)
	}
}

func TestRunTimeout(t *testing.T) {
	_, err := Exec{Timeout: 100 * time.Millisecond}.Run(context.Background(), Command{Argv: []string{"/bin/sleep", "5"}})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v, want a timeout error", err)
	}
}

func TestRunMissingProgram(t *testing.T) {
	_, err := Exec{}.Run(context.Background(), Command{Argv: []string{"/nonexistent/pfctl", "-s", "info"}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/pfctl") {
		t.Fatalf("got %v, want an error naming the program", err)
	}
}

// testOnlyChildren are the packages allowed os/exec because no program
// imports them: they start long-lived helpers (a broker) for tests, which
// Runner, built for short commands with a timeout, does not.
// TestOnlyExecrunImportsOsExec checks that only _test.go files import them.
var testOnlyChildren = map[string]bool{
	"internal/mosquitto": true,
}

// TestOnlyExecrunImportsOsExec keeps process execution in one audited place:
// every child a program starts goes through Runner (LC_ALL=C, timeout, argv
// in errors).
func TestOnlyExecrunImportsOsExec(t *testing.T) {
	root := filepath.Join("..")
	fset := token.NewFileSet()
	const module = "github.com/macake/macake/"
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		isTest := strings.HasSuffix(path, "_test.go")
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !isTest && p == "os/exec" && rel != "execrun" && !testOnlyChildren[filepath.ToSlash(rel)] {
				t.Errorf("%s imports os/exec; run children through Exec instead", path)
			}
			if !isTest && testOnlyChildren[strings.TrimPrefix(p, module)] {
				t.Errorf("%s imports %s, which starts children without Exec and is for tests only", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"pipe": "pipe", "48001": "48001", "": "''", "a b": "'a b'", "it's": `'it'\''s'`, "com.apple/*": "'com.apple/*'"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
