// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

// buildMacake builds the macake binary into dir.
func buildMacake(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "macake")
	// go test puts the go tool's directory first on PATH. -trimpath as
	// `make build`: the packages compiled here are then the ones `make
	// deb` links, after `make test`, instead of compiling them again.
	cmd := execrun.Command{Argv: []string{"go", "build", "-trimpath", "-o", bin, "github.com/macake/macake/cmd/macake"}}
	res, err := execrun.Exec{Timeout: 5 * time.Minute, Env: []string{"CGO_ENABLED=0"}}.Run(context.Background(), cmd)
	if _, err := execrun.Check(cmd, res, err); err != nil {
		t.Fatalf("building macake: %v", err)
	}
	return bin
}

// copyExamples copies examples/links.d into a fresh directory with the
// modes macake demands of policy files as root (a checkout made under a
// permissive umask would otherwise be refused).
func copyExamples(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "links.d")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir("../../examples/links.d", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, d.Name()), b, 0o644)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestEndToEndWithBinaries runs the real macake binary against the
// emulator's pfctl and dnctl binaries on the shipped examples: apply
// shapes, apply again changes nothing, down twice is fine and leaves the
// emulated Mac as it was, and the state lock works across processes.
func TestEndToEndWithBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("the emulated pfctl and dnctl refuse a user as a Mac's do; run the tests as root, as CI does")
	}
	bin := t.TempDir()
	emu := pfdntest.BuildBinaries(t, bin)
	macake := buildMacake(t, bin)
	emuState := filepath.Join(t.TempDir(), "emulator.json")
	stateDir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	facts := filepath.Join(t.TempDir(), "facts.json")
	os.WriteFile(facts, []byte(`{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01"}]}`), 0o644)
	configDir := copyExamples(t)
	runner := execrun.Exec{Timeout: time.Minute, Env: append(emu.Env(emuState), linkfacts.EnvFile+"="+facts, "NO_COLOR=1")}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		argv := append([]string{macake, "--config-dir", configDir, "--state-dir", stateDir}, args...)
		res, err := runner.Run(context.Background(), execrun.Command{Argv: argv})
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return res.ExitCode, string(res.Stdout), string(res.Stderr)
	}
	must := func(want int, args ...string) string {
		t.Helper()
		code, stdout, stderr := run(args...)
		if code != want {
			t.Fatalf("macake %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, stdout, stderr)
		}
		return stdout
	}
	snapshot := func() string {
		t.Helper()
		e, err := pfdntest.LoadFile(emuState)
		if err != nil {
			t.Fatal(err)
		}
		return e.Snapshot().String()
	}
	pristine := snapshot()

	stdout := must(exitcode.OK, "apply")
	if !strings.Contains(stdout, `+ pipe 48001 "starlink/upload"`) || !strings.Contains(stdout, "Applied: 4 created, 0 updated, 0 removed") {
		t.Fatalf("first apply:\n%s", stdout)
	}
	if s := snapshot(); !strings.Contains(s, "pipe 48002: 48002: 150.000 Mbit/s") || !strings.Contains(s, "ruleset com.apple/macake:") {
		t.Fatalf("the emulated Mac is not shaped:\n%s", s)
	}
	if stdout := must(exitcode.OK, "apply"); !strings.HasPrefix(stdout, "No changes. Live pf/dummynet state matches ") {
		t.Fatalf("second apply:\n%s", stdout)
	}
	if stdout := must(exitcode.OK, "links"); !strings.Contains(stdout, "Active: starlink on en0") {
		t.Fatalf("links:\n%s", stdout)
	}

	// The lock across processes: held here, the binary waits, then gives
	// up naming this process.
	l, err := state.AcquireLock(context.Background(), stateDir, state.LockOptions{Wait: time.Second, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run("apply")
	l.Release()
	if code != exitcode.Failure || !strings.Contains(stderr, fmt.Sprintf("(pid %d)", os.Getpid())) {
		t.Fatalf("apply with the lock held elsewhere: exit %d, stderr:\n%s", code, stderr)
	}
	// Two runs at once: the second waits for the first; both succeed.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() { codes[i], _, _ = run("apply") })
	}
	wg.Wait()
	if codes[0] != exitcode.OK || codes[1] != exitcode.OK {
		t.Fatalf("concurrent applies: exits %v", codes)
	}

	must(exitcode.OK, "down")
	if stdout := must(exitcode.OK, "down"); stdout != "No changes. macake owns nothing in pf/dummynet.\n" {
		t.Fatalf("second down:\n%s", stdout)
	}
	if after := snapshot(); after != pristine {
		t.Fatalf("after down:\n%s\nwant:\n%s", after, pristine)
	}
}
