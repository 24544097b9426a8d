// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/cmd/macake/internal/validation"
	"github.com/macake/macake/internal/golden"
)

// validateAs runs the CLI in-process as if the effective uid were euid.
func validateAs(t *testing.T, euid int, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(string) string { return "" }, euid: func() int { return euid }}
	code := e.main(args)
	return code, out.String(), errb.String()
}

const (
	goodDir = "../../examples/links.d"
	badDir  = "../../examples/bad"
)

func TestValidateExamples(t *testing.T) {
	code, stdout, stderr := validateAs(t, 501, "validate", "--config-dir", goodDir)
	if code != exitcode.OK || stdout != "ok: 4 links (home-cable, hotspot, starlink, travel)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stderr != "note: not running as root: file ownership and mode checks skipped\n" {
		t.Errorf("stderr %q, want only the ownership note", stderr)
	}
	// The global flag works before the command too.
	if code, stdout, _ := validateAs(t, 501, "--config-dir", goodDir, "validate", "--target", "darwin"); code != exitcode.OK || !strings.HasPrefix(stdout, "ok: 4 links") {
		t.Errorf("--config-dir before the command: exit %d, %q", code, stdout)
	}
}

// TestValidateBadExamples runs validate on examples/bad: exit 78 and one
// FILE:LINE:COL: line per marked problem, exactly as in the golden file.
func TestValidateBadExamples(t *testing.T) {
	code, stdout, stderr := validateAs(t, 501, "validate", "--config-dir", badDir, "--target", "darwin")
	if code != exitcode.Config {
		t.Errorf("exit %d, want %d", code, exitcode.Config)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	positioned := regexp.MustCompile(`^\.\./\.\./examples/bad/[A-Za-z0-9_-]+\.toml:\d+:\d+: \S`)
	for _, l := range lines {
		if !positioned.MatchString(l) {
			t.Errorf("not a FILE:LINE:COL: line: %q", l)
		}
	}
	marks := 0
	files, _ := filepath.Glob(filepath.Join(badDir, "*.toml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		marks += strings.Count(string(data), "# want:") + strings.Count(string(data), "# want-above:")
	}
	if len(lines) != marks {
		t.Errorf("%d problem lines, %d marked problems in %s", len(lines), marks, badDir)
	}
	if !strings.Contains(stderr, "problems in") {
		t.Errorf("stderr %q lacks the summary", stderr)
	}
	golden.Check(t, filepath.Join("testdata", "validate_bad.golden"), []byte(stdout), "what validate says of every broken example")
}

func TestValidateJSON(t *testing.T) {
	for _, tc := range []struct {
		dir    string
		code   int
		links  int
		errors bool
	}{
		{goodDir, exitcode.OK, 4, false},
		{badDir, exitcode.Config, 1, true}, // twin-a is valid on its own
	} {
		code, stdout, _ := validateAs(t, 501, "validate", "--json", "--config-dir", tc.dir)
		var rep struct {
			FormatVersion    string `json:"format_version"`
			Valid            bool   `json:"valid"`
			OwnershipChecked bool   `json:"ownership_checked"`
			Links            []struct {
				Name, File, Interface, Mode string
			} `json:"links"`
			Warnings []json.RawMessage `json:"warnings"`
			Errors   []struct {
				File    string `json:"file"`
				Line    int    `json:"line"`
				Col     int    `json:"column"`
				Message string `json:"message"`
			} `json:"errors"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", tc.dir, err, stdout)
		}
		if code != tc.code || rep.FormatVersion != validation.FormatVersion || rep.Valid == tc.errors || rep.OwnershipChecked || len(rep.Links) != tc.links || (len(rep.Errors) > 0) != tc.errors || rep.Warnings == nil {
			t.Errorf("%s: exit %d, report %+v", tc.dir, code, rep)
		}
		for _, e := range rep.Errors {
			if e.File == "" || e.Line < 1 || e.Col < 1 || e.Message == "" {
				t.Errorf("%s: error without position: %+v", tc.dir, e)
			}
		}
		if tc.links == 4 && (rep.Links[2].Name != "starlink" || rep.Links[2].Mode != "autorate" || rep.Links[2].Interface != "en0") {
			t.Errorf("links: %+v", rep.Links)
		}
	}
}

func TestValidateWarningsGoToStderr(t *testing.T) {
	dir := t.TempDir()
	links := filepath.Join(dir, "links.d")
	if err := os.Mkdir(links, 0o755); err != nil {
		t.Fatal(err)
	}
	policy := "[match]\ninterface = \"en0\"\n[cake]\nnat = true\n"
	if err := os.WriteFile(filepath.Join(links, "home.toml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := validateAs(t, 501, "validate", "--config-dir", links, "--target", "darwin")
	if code != exitcode.OK || stdout != "ok: 1 link (home)\n" || !strings.Contains(stderr, "home.toml:3:2: warning: cake.nat: macOS dummynet cannot do") {
		t.Errorf("darwin: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, _, stderr := validateAs(t, 501, "validate", "--config-dir", links, "--target", "linux"); strings.Contains(stderr, "warning") {
		t.Errorf("linux: stderr %q", stderr)
	}
	// The daemon settings beside the directory are checked too.
	if err := os.WriteFile(filepath.Join(dir, "macake.toml"), []byte("log_format = \"xml\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = validateAs(t, 501, "validate", "--config-dir", links, "--target", "linux")
	if code != exitcode.Config || !strings.Contains(stdout, "macake.toml:1:14: log_format: unknown log format \"xml\"") {
		t.Errorf("daemon settings: exit %d, stdout %q", code, stdout)
	}
}

func TestValidateOwnershipAsRoot(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "home.toml")
	if err := os.WriteFile(path, []byte("[match]\ninterface = \"en0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := validateAs(t, 0, "validate", "--config-dir", dir)
	if code != exitcode.Config || !strings.Contains(stdout, "refusing to use") || strings.Contains(stderr, "note:") {
		t.Errorf("as root: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := validateAs(t, 501, "validate", "--config-dir", dir); code != exitcode.OK || !strings.Contains(stderr, "checks skipped") {
		t.Errorf("as a user: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestValidateUsageAndMissingDir(t *testing.T) {
	if code, _, stderr := validateAs(t, 501, "validate", "--target", "windows"); code != exitcode.Usage || !strings.Contains(stderr, "want darwin or linux") {
		t.Errorf("--target windows: exit %d, %q", code, stderr)
	}
	if code, _, _ := validateAs(t, 501, "validate", "extra"); code != exitcode.Usage {
		t.Errorf("extra argument: exit %d", code)
	}
	missing := filepath.Join(t.TempDir(), "links.d")
	code, stdout, _ := validateAs(t, 501, "validate", "--config-dir", missing)
	if code != exitcode.Config || stdout != missing+": no such directory (create it: sudo mkdir -p "+missing+")\n" {
		t.Errorf("missing dir: exit %d, %q", code, stdout)
	}
	code, stdout, stderr := validateAs(t, 501, "validate", "--config-dir", t.TempDir())
	if code != exitcode.OK || stdout != "ok: 0 links\n" || !strings.Contains(stderr, "nothing will be shaped") {
		t.Errorf("empty dir: exit %d, %q, %q", code, stdout, stderr)
	}
}

// TestValidateLimitsAreTheTargetBackends: a 10 Gbit/s link with a 2 MB
// queue is fine for tc and too much for dummynet; each target is held to
// its own backend's limits (issue 12, item 15).
func TestValidateLimitsAreTheTargetBackends(t *testing.T) {
	dir := t.TempDir()
	policy := "[match]\ninterface = \"eth0\"\n[shaper]\ndownload = \"10gbit\"\nupload = \"2500mbit\"\nqueue = \"2MB\"\n"
	if err := os.WriteFile(filepath.Join(dir, "fiber.toml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := validateAs(t, 501, "validate", "--config-dir", dir, "--target", "linux"); code != exitcode.OK {
		t.Errorf("--target linux: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ := validateAs(t, 501, "validate", "--config-dir", dir, "--target", "darwin")
	want := []string{
		"fiber.toml:4:12: shaper.download: 10gbit is above 2147.483 Mbit/s, the highest rate dummynet shapes",
		"fiber.toml:5:10: shaper.upload: 2500mbit is above 2147.483 Mbit/s",
		"fiber.toml:6:9: shaper.queue: 2MB is above 1MB, the largest queue dummynet takes",
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("--target darwin: no %q in\n%s", w, stdout)
		}
	}
	if code != exitcode.Config {
		t.Errorf("--target darwin: exit %d, want %d", code, exitcode.Config)
	}
}

// TestValidateStopsOnSignal: a signal cancels the command's context, and
// validate stops between files and says it did not check them all, rather
// than carry on (a `timeout 5 macake validate` ran 51 s) or call them valid.
func TestValidateStopsOnSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	e := &env{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(string) string { return "" }, euid: func() int { return 501 }}
	code := e.main([]string{"validate", "--config-dir", goodDir})
	if code != exitcode.Failure || out.String() != "" || !strings.Contains(errb.String(), "macake validate: interrupted (context canceled); not every file was checked") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and the interruption on stderr", code, out.String(), errb.String())
	}
}

// TestValidateWarnsOfAnUnmeasuredAutoRate: a policy whose rates are
// "auto" is valid, but plan and apply refuse it until the link is
// measured: validate says so, with the command in the directories it was
// given, until the state file holds a measurement of the link (issue 27,
// item 4).
func TestValidateWarnsOfAnUnmeasuredAutoRate(t *testing.T) {
	dir, stateDir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "lte.toml"), []byte("[match]\ninterface = \"en0\"\n[shaper]\ndownload = \"auto\"\nupload = \"auto\"\n"), 0o644)
	validate := func() (int, string) {
		code, _, stderr := validateAs(t, 501, "--config-dir", dir, "--state-dir", stateDir, "validate")
		return code, stderr
	}
	code, stderr := validate()
	want := dir + `/lte.toml:4:1: warning: shaper.download and shaper.upload are "auto": plan, apply and watch shape link "lte" only on a network "sudo macake --config-dir ` +
		dir + ` --state-dir ` + stateDir + ` measure --link lte" has measured, and it has measured none yet`
	if code != exitcode.OK || !strings.Contains(stderr, want) {
		t.Errorf("unmeasured: exit %d, stderr %q; want 0 and %q", code, stderr, want)
	}
	os.WriteFile(filepath.Join(stateDir, "state.json"), []byte(`{"version":1,"profiles":{"lte@74:24:9f:00:00:01":{"download_capacity_bits_per_second":20000000,"upload_capacity_bits_per_second":5000000}}}`), 0o600)
	if code, stderr := validate(); code != exitcode.OK || strings.Contains(stderr, "warning") {
		t.Errorf("measured: exit %d, stderr %q; want no warning", code, stderr)
	}
	os.WriteFile(filepath.Join(stateDir, "state.json"), []byte(`{"version":1,"profiles":{"other":{"download_capacity_bits_per_second":20000000}}}`), 0o600)
	if code, stderr := validate(); code != exitcode.OK || !strings.Contains(stderr, "it has measured none yet") {
		t.Errorf("another link measured: exit %d, stderr %q; want the warning", code, stderr)
	}
}
