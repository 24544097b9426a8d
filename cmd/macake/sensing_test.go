// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
)

func TestSensingCommandsRejectBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"measure", "--duration", "1s"},
		{"measure", "--streams", "0"},
		{"measure", "--reflector", "one.one.one.one"},
		{"measure", "extra"},
		{"bench", "--idle", "10ms"},
		{"bench", "--reflector", "224.0.0.1"},
		{"monitor", "--every", "1ms"},
		{"monitor", "--interval", "1ms"},
		{"monitor", "--reflector", "0.0.0.0"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != exitcode.Usage || stderr == "" {
			t.Errorf("macake %v: exit %d, stderr %q; want 64 and a message", args, code, stderr)
		}
	}
}

func TestMeasureSaysWhenTheFactsFileIsBroken(t *testing.T) {
	e := testEnv(t, map[string]string{"MACAKE_LINK_FACTS": "/nonexistent/facts.json"})
	if code := runMeasure(e, []string{"--server", "http://127.0.0.1:1"}); code != exitcode.Failure {
		t.Errorf("exit %d", code)
	}
	if s := e.stderr.(*strings.Builder).String(); !strings.Contains(s, "MACAKE_LINK_FACTS=/nonexistent/facts.json") {
		t.Errorf("stderr %q", s)
	}
}

// testEnv is an env whose environment variables come from vars, with
// strings.Builder outputs.
func testEnv(t *testing.T, vars map[string]string) *env {
	return &env{ctx: t.Context(), stdin: strings.NewReader(""), stdout: &strings.Builder{}, stderr: &strings.Builder{},
		getenv: func(k string) string { return vars[k] }, euid: func() int { return 1000 },
		configDir: t.TempDir(), stateDir: t.TempDir()}
}

// TestNoDefaultRouteHintFitsTheCommand: each command's hint names only
// flags it has.
func TestNoDefaultRouteHintFitsTheCommand(t *testing.T) {
	facts := filepath.Join(t.TempDir(), "facts.json")
	os.WriteFile(facts, []byte(`{"interfaces":[{"name":"en0","up":true}]}`), 0o644)
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"monitor", "--duration", "1s"}, "pass --reflector ADDR", "--link"},
		{[]string{"measure", "--no-save"}, "no default route", "--reflector"},
	} {
		e := testEnv(t, map[string]string{"MACAKE_LINK_FACTS": facts})
		code := lookup(tc.args[0]).run(e, tc.args[1:])
		stderr := e.stderr.(*strings.Builder).String()
		if code != exitcode.Failure || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, tc.not) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1, %q and no %q", tc.args, code, stderr, tc.want, tc.not)
		}
	}
}

func TestNotSavedHintsSudoOnlyOnPermissionErrors(t *testing.T) {
	denied := &os.PathError{Op: "open", Path: "/var/db/macake/state.json", Err: os.ErrPermission}
	if m := notSavedMessage(fmt.Errorf("writing state: %w", denied)); !strings.Contains(m, "sudo") {
		t.Errorf("permission denied: %q, want the sudo hint", m)
	}
	if m := notSavedMessage(errors.New("a direction measured no throughput")); strings.Contains(m, "sudo") {
		t.Errorf("not a permission problem: %q, want no sudo hint", m)
	}
}
