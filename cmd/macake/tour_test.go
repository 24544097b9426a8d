// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/service"
)

// The tour's display: the commands as a user types them, on a Mac with
// the default directories.
const (
	tourConfigDir = "/etc/macake/links.d"
	tourStateDir  = "/var/db/macake"
)

// tour runs the CLI in-process on the emulated Mac of the apply tests (and
// the in-memory launchd of the service tests), one command after another
// as a user would, and records each command with its output (standard
// output and standard error as a terminal shows them, interleaved) as a
// golden file in testdata/tour. The README and docs/ show these files;
// internal/doccheck keeps them equal.
type tour struct {
	*rig
	mac *fakeMac
}

func newTour(t *testing.T) *tour {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the tour runs the CLI as root, whose checks refuse policy files that a user owns: run it as root")
	}
	r := newRig(t, nil, starlinkFacts)
	// The rig's directories stand for the defaults: the commands run with
	// no --config-dir or --state-dir, as a user's would, and the state
	// directory is the default one (which apply may create).
	saved := defaultStateDir
	defaultStateDir = r.stateDir
	t.Cleanup(func() { defaultStateDir = saved })
	m := newFakeMac(t)
	if err := m.files.MkdirAll(r.configDir, 0o755, service.RootWheel); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // a saved plan's relative name lands here
	return &tour{rig: r, mac: m}
}

// tourTimes are the figures that change from run to run: how long an
// apply took, when a saved plan was made, and the date init writes into
// its file's header.
var tourTimes = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\(\d+\.\d\ds\)`), "(0.01s)"},
	{regexp.MustCompile(`\(made \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)`), "(made 2026-12-01 23:30:44)"},
	{regexp.MustCompile(`written by ` + "`macake init`" + ` on \d{4}-\d{2}-\d{2}`), "written by `macake init` on 2026-12-01"},
}

// display turns the output of a run in the rig's directories into what
// the same run prints with the default ones.
func (tr *tour) display(out string) string {
	// Only a directory other than the default one is named in init's
	// hints (firstpolicy.Next); every hint names it, so the column stays.
	out = strings.ReplaceAll(out, " --config-dir "+tr.configDir, "")
	out = strings.ReplaceAll(out, tr.configDir, tourConfigDir)
	out = strings.ReplaceAll(out, tr.stateDir, tourStateDir)
	out = strings.ReplaceAll(out, tr.factsFile, "/tmp/facts.json")
	for _, x := range tourTimes {
		out = x.re.ReplaceAllString(out, x.with)
	}
	return out
}

// step runs `macake ARGS` as root, wants exit status code, and checks
// "$ PROMPT" and the output against testdata/tour/NAME.txt.
func (tr *tour) step(name, prompt string, code int, args ...string) {
	tr.t.Helper()
	tr.emu.SetPrivileged(true)
	var out bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &out,
		getenv: os.Getenv, euid: func() int { return 0 }, configDir: tr.configDir, stateDir: tr.stateDir}
	if got := e.dispatch(args); got != code {
		tr.t.Fatalf("%s: exit %d, want %d\n%s", prompt, got, code, out.String())
	}
	tourGolden(tr.t, name+".txt", "$ "+prompt+"\n"+tr.display(out.String()))
}

// edit rewrites the policy file of link name with old replaced by new.
func (tr *tour) edit(name, old, new string) {
	tr.t.Helper()
	path := filepath.Join(tr.configDir, name+".toml")
	b, err := os.ReadFile(path)
	if err != nil {
		tr.t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		tr.t.Fatalf("%s has no %q:\n%s", path, old, b)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

// tourDir is testdata/tour, found before a tour leaves the package's
// directory.
var tourDir = must(filepath.Abs(filepath.Join("testdata", "tour")))

// docsShowIt is why a golden file of the tour or of doctor must not change
// by accident: the documentation shows it, kept equal by internal/doccheck.
const docsShowIt = "the documentation shows it; go test ./internal/doccheck -update then rewrites the docs"

// tourGolden compares got with testdata/tour/name, or with -update writes
// it there.
func tourGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join(tourDir, name), []byte(got), docsShowIt)
}

// TestTour is the README's five-minute tour and the transcripts of
// docs/USAGE.md, run on the emulated Mac: a first policy from init,
// validate, plan, apply (twice), an edit, a typo, a saved plan gone
// stale, links, install-daemon and down. (status is the daemon's: its
// recorded status, daemon/statusapi/testdata/watch-status.txt.)
func TestTour(t *testing.T) {
	tr := newTour(t)
	tr.step("init", "sudo macake init home --download 250mbit --upload 20mbit", exitcode.OK,
		"init", "home", "--download", "250mbit", "--upload", "20mbit")
	written, err := os.ReadFile(filepath.Join(tr.configDir, "home.toml"))
	if err != nil {
		t.Fatal(err)
	}
	tourGolden(t, "home.toml", tr.display(string(written)))

	tr.step("validate", "macake validate", exitcode.OK, "validate")
	tr.step("plan", "sudo macake plan", exitcode.OK, "plan")
	tr.step("apply", "sudo macake apply", exitcode.OK, "apply")
	tr.step("apply-again", "sudo macake apply", exitcode.OK, "apply")

	tr.edit("home", `download = "250mbit"`, `download = "300mbit"`)
	tr.step("apply-edit", "sudo macake apply", exitcode.OK, "apply")

	tr.edit("home", `upload   = "20mbit"`, `upload   = "20mbps"`)
	tr.step("validate-typo", "macake validate", exitcode.Config, "validate")
	tr.step("apply-typo", "sudo macake apply", exitcode.Config, "apply")
	tr.edit("home", `upload   = "20mbps"`, `upload   = "25mbit"`)

	tr.step("plan-out", "sudo macake plan --out reviewed.plan", exitcode.OK, "plan", "--out", "reviewed.plan")
	tr.edit("home", `upload   = "25mbit"`, `upload   = "22mbit"`)
	tr.step("apply-stale", "sudo macake apply reviewed.plan", exitcode.Failure, "apply", "reviewed.plan")

	tr.setPolicies(map[string]string{"home": string(must(os.ReadFile(filepath.Join(tr.configDir, "home.toml")))), "travel": travelPolicy, "cable": cablePolicy})
	tr.step("links", "macake links", exitcode.OK, "links")

	tr.step("install-daemon", "sudo macake install-daemon", exitcode.OK, "install-daemon")
	tr.step("down", "sudo macake down", exitcode.OK, "down")
	tr.step("down-again", "sudo macake down", exitcode.OK, "down")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestLinuxExamplesTranscript is examples/linux/README.md's transcript:
// the Linux examples validate for Linux.
func TestLinuxExamplesTranscript(t *testing.T) {
	code, stdout, stderr := runCLI(t, "validate", "--target", "linux", "--config-dir", "../../examples/linux/links.d")
	if code != exitcode.OK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	tourGolden(t, "validate-linux-examples.txt", "$ macake validate --target linux --config-dir examples/linux/links.d\n"+stderr+stdout)
}
