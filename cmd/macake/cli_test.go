// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
		if code != exitUsage {
			t.Errorf("macake %v: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr)
		}
		if stderr == "" {
			t.Errorf("macake %v: no message on stderr", args)
		}
	}
}

func TestCLIHelpForEveryCommand(t *testing.T) {
	for _, c := range commands {
		code, stdout, _ := runCLI(t, c.name, "--help")
		if code != exitOK || !strings.Contains(stdout, "Usage: macake "+c.name) {
			t.Errorf("macake %s --help: exit %d, stdout %q", c.name, code, stdout)
		}
		code, stdout, _ = runCLI(t, "help", c.name)
		if code != exitOK || !strings.Contains(stdout, c.short) {
			t.Errorf("macake help %s: exit %d, stdout %q", c.name, code, stdout)
		}
	}
	code, stdout, _ := runCLI(t, "--help")
	if code != exitOK || !strings.Contains(stdout, "Commands:") {
		t.Errorf("macake --help: exit %d, stdout %q", code, stdout)
	}
}

func TestCLIVersion(t *testing.T) {
	code, stdout, _ := runCLI(t, "version")
	if code != exitOK || !strings.HasPrefix(stdout, "macake ") {
		t.Fatalf("version: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runCLI(t, "version", "--json")
	if code != exitOK || !strings.Contains(stdout, `"go_version"`) {
		t.Fatalf("version --json: exit %d, stdout %q", code, stdout)
	}
}
