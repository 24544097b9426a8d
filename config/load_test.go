// SPDX-License-Identifier: Apache-2.0

package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/macake/macake/config/units"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func names(links []Link) []string {
	var out []string
	for _, l := range links {
		out = append(out, l.Name)
	}
	return out
}

var skipOwner = LoadOptions{SkipOwnershipCheck: true, Target: TargetLinux}

func TestLoadReadsOnlyPolicyFilesInLexicalOrder(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b.toml":         "[match]\ninterface = \"en1\"\n",
		"a.toml":         "[match]\ninterface = \"en0\"\n",
		".hidden.toml":   "garbage",
		".#a.toml":       "garbage",
		"a.toml~":        "garbage",
		".a.toml.swp":    "garbage",
		"x.toml.swp":     "garbage",
		"notes.txt":      "garbage",
		"README.md":      "garbage",
		"c.toml.rpmsave": "garbage",
	})
	if err := os.Mkdir(filepath.Join(dir, "sub.toml"), 0o755); err != nil {
		t.Fatal(err)
	}
	links, warnings, err := Load(dir, skipOwner)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(links), ","); got != "a,b" {
		t.Errorf("links %s, want a,b", got)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0].String(), "sub.toml: warning: is a directory") {
		t.Errorf("warnings %v", warnings)
	}
}

func TestLoadReportsAllProblemsOfAllFilesAndKeepsValidLinks(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a-good.toml":   "[match]\ninterface = \"en0\"\n",
		"b-bad.toml":    "[match]\ninterface = \"en1\"\n[shaper]\ndownload = \"1mbps\"\nupload = 5\n",
		"c-bad.toml":    "[match]\ninterface = \"EN2\"\nsid = \"x\"\n",
		"d-syntax.toml": "[match\n",
	})
	links, _, err := Load(dir, skipOwner)
	if got := strings.Join(names(links), ","); got != "a-good" {
		t.Errorf("links %s, want a-good (the valid one)", got)
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		"b-bad.toml:4:12: shaper.download",
		"b-bad.toml:5:10: shaper.upload",
		"c-bad.toml:2:13: match.interface",
		"c-bad.toml:3:1: unknown key \"sid\" in [match] (did you mean \"ssid\"?)",
		"d-syntax.toml:1:7: TOML syntax",
	}
	if len(lines) != len(want) {
		t.Fatalf("error has %d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], filepath.Join(dir, w)) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], filepath.Join(dir, w))
		}
	}
	if n := len(Problems(err)); n != len(want) {
		t.Errorf("Problems: %d, want %d", n, len(want))
	}
}

func TestLoadRejectsIndistinguishableLinks(t *testing.T) {
	dir := t.TempDir()
	same := "# same\n[match]\ninterface = \"en0\"\ngateway_mac = \"74:24:9f:00:00:01\"\npriority = 2\n"
	writeFiles(t, dir, map[string]string{
		"home.toml":  same,
		"home2.toml": same,
		// Differs in priority, and in keys: both fine.
		"home3.toml": strings.Replace(same, "priority = 2", "priority = 3", 1),
		"home4.toml": "[match]\ninterface = \"en0\"\npriority = 2\n",
		// Same keys on another interface: fine.
		"other.toml": strings.Replace(same, "en0", "en1", 1),
	})
	links, _, err := Load(dir, skipOwner)
	want := filepath.Join(dir, "home2.toml") + `:2:2: link "home2" cannot be told apart from "home" (` + filepath.Join(dir, "home.toml") + ")"
	if err == nil || !strings.HasPrefix(err.Error(), want) || len(Problems(err)) != 1 {
		t.Fatalf("error %v\nwant one problem starting %q", err, want)
	}
	if got := strings.Join(names(links), ","); got != "home,home3,home4,other" {
		t.Errorf("links %s", got)
	}
}

func TestLoadDirectoryProblems(t *testing.T) {
	_, _, err := Load(filepath.Join(t.TempDir(), "missing"), skipOwner)
	if err == nil || !strings.Contains(err.Error(), "missing: no such directory (create it: sudo mkdir -p") {
		t.Errorf("missing dir: %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	writeFiles(t, filepath.Dir(f), map[string]string{"file": ""})
	if _, _, err := Load(f, skipOwner); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("file as dir: %v", err)
	}
	links, _, err := Load(t.TempDir(), skipOwner)
	if err != nil || len(links) != 0 {
		t.Errorf("empty dir: %v %v", links, err)
	}
}

func TestLoadChecksOwnershipAndMode(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.toml": minimal, "b.toml": minimal + "priority = 1\n"})
	if err := os.Chmod(filepath.Join(dir, "b.toml"), 0o664); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(dir, LoadOptions{})
	if os.Geteuid() == 0 {
		want := filepath.Join(dir, "b.toml") + ": refusing to use: writable by group or others (mode 0664); fix: sudo chmod go-w"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("group-writable file: %v\nwant %q", err, want)
		}
		if err := os.Chown(filepath.Join(dir, "a.toml"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		_, _, err = Load(dir, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), "a.toml: refusing to use: owned by uid 65534, not root; fix: sudo chown root") {
			t.Errorf("file not owned by root: %v", err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		_, _, err = Load(dir, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), dir+": refusing to use: writable by group or others (mode 0777)") || len(Problems(err)) != 1 {
			t.Errorf("world-writable dir: %v", err)
		}
	} else {
		want := dir + ": refusing to use: owned by uid"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("dir owned by a user: %v\nwant %q", err, want)
		}
	}
	links, _, err := Load(dir, skipOwner)
	if err != nil || len(links) != 2 {
		t.Errorf("with the check off: %v %v", names(links), err)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"sim.toml": minimal, "bad.toml": "[match]\n"})
	l, _, err := LoadFile(filepath.Join(dir, "sim.toml"), skipOwner)
	if err != nil || l.Name != "sim" || l.Match.Interface != "en0" {
		t.Errorf("LoadFile: %+v %v", l, err)
	}
	if _, _, err := LoadFile(filepath.Join(dir, "bad.toml"), skipOwner); err == nil || !strings.Contains(err.Error(), "bad.toml:1:2: [match] needs interface") {
		t.Errorf("LoadFile bad: %v", err)
	}
	if _, _, err := LoadFile(filepath.Join(dir, "none.toml"), skipOwner); err == nil || !strings.Contains(err.Error(), "none.toml: cannot read: no such file") {
		t.Errorf("LoadFile missing: %v", err)
	}
	if _, _, err := LoadFile(dir, skipOwner); err == nil || !strings.Contains(err.Error(), "is a directory, not a regular file") {
		t.Errorf("LoadFile dir: %v", err)
	}
}

func TestExamplesAreValid(t *testing.T) {
	for _, target := range []Target{TargetDarwin, TargetLinux} {
		links, warnings, err := Load("../examples/links.d", LoadOptions{Target: target, SkipOwnershipCheck: true})
		if err != nil || len(warnings) != 0 {
			t.Fatalf("%s: examples: %v, warnings %v", target, err, warnings)
		}
		if got := strings.Join(names(links), ","); got != "home-cable,hotspot,starlink,travel" {
			t.Errorf("examples: %s", got)
		}
	}
}

var wantRE = regexp.MustCompile(`# want(-above)?: (.*)$`)

// badExpectations reads the "# want: TEXT" marks of examples/bad: file →
// line → expected part of the message. "# want-above: TEXT" marks the line
// above (where a comment cannot go), and a file valid on its own says so
// with "# want-none: why".
func badExpectations(t *testing.T, dir string) map[string]map[int]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".toml") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[path] = map[int]string{}
		marked := strings.Contains(string(data), "# want-none:")
		for i, line := range strings.Split(string(data), "\n") {
			if m := wantRE.FindStringSubmatch(line); m != nil {
				n := i + 1
				if m[1] != "" {
					n--
				}
				out[path][n] = m[2]
				marked = true
			}
		}
		if !marked {
			t.Errorf("%s has no '# want:' mark", path)
		}
	}
	return out
}

// TestBadExamplesReportEveryMarkedProblem checks examples/bad: every
// marked problem is reported on its line, and nothing else is.
func TestBadExamplesReportEveryMarkedProblem(t *testing.T) {
	dir := "../examples/bad"
	want := badExpectations(t, dir)
	_, _, err := Load(dir, LoadOptions{SkipOwnershipCheck: true, Target: TargetDarwin, Limits: testLimits[TargetDarwin]})
	got := map[string]map[int]string{}
	for _, p := range Problems(err) {
		if p.Line < 1 || p.Col < 1 {
			t.Errorf("problem without a position: %v", p)
			continue
		}
		if got[p.File] == nil {
			got[p.File] = map[int]string{}
		}
		if _, dup := got[p.File][p.Line]; dup {
			t.Errorf("two problems on one line: %v", p)
		}
		got[p.File][p.Line] = p.Message
	}
	var files []string
	for f := range want {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		for line, part := range want[f] {
			msg, ok := got[f][line]
			switch {
			case !ok:
				t.Errorf("%s:%d: no problem reported, want one containing %q", f, line, part)
			case !strings.Contains(msg, part):
				t.Errorf("%s:%d: %q does not contain %q", f, line, msg, part)
			}
		}
		for line, msg := range got[f] {
			if _, ok := want[f][line]; !ok {
				t.Errorf("%s:%d: unexpected problem %q", f, line, msg)
			}
		}
	}
}

// TestLoadStopsWhenTheContextIsDone: a done context stops Load before the
// next file, as one problem on the directory, which every caller treats
// as "keep what you have" (watch) or "change nothing" (apply).
func TestLoadStopsWhenTheContextIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	links, _, err := Load("../examples/links.d", LoadOptions{SkipOwnershipCheck: true, Context: ctx})
	probs := Problems(err)
	if len(links) != 0 || len(probs) != 1 || probs[0].File != "../examples/links.d" ||
		probs[0].Message != "reading stopped after 0 of 4 files: context canceled" {
		t.Fatalf("got %d links and %v", len(links), err)
	}
}

// loadGuarded runs Load, failing the test if it has not returned after a
// minute: the hang this guards against lasts forever.
func loadGuarded(t *testing.T, dir string, opts LoadOptions) ([]Link, error) {
	t.Helper()
	type result struct {
		links []Link
		err   error
	}
	done := make(chan result, 1)
	go func() {
		links, _, err := Load(dir, opts)
		done <- result{links, err}
	}()
	select {
	case r := <-done:
		return r.links, r.err
	case <-time.After(time.Minute):
		t.Fatal("Load hung")
		return nil, nil
	}
}

// TestLoadRefusesSpecialFiles: a FIFO (or another special file) named
// *.toml is a problem of its own, found without opening it; before, the
// open blocked validate, apply and watch forever. The other files load.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"b.toml": minimal})
	if err := syscall.Mkfifo(filepath.Join(dir, "a.toml"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	links, err := loadGuarded(t, dir, skipOwner)
	probs := Problems(err)
	if len(links) != 1 || links[0].Name != "b" || len(probs) != 1 ||
		probs[0].Error() != filepath.Join(dir, "a.toml")+": is a named pipe, not a regular file: macake reads only regular files" {
		t.Fatalf("links %v, problems %v", links, err)
	}
}

// TestLoadRefusesLinksOutOfTheDirectory: a policy that is a symbolic link
// to a file outside links.d is refused, naming the target but quoting
// nothing of it (a password file's line used to show up as a key); a
// link to a file inside the directory is read.
func TestLoadRefusesLinksOutOfTheDirectory(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte("root_password = \"hunter2\"\nhunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"real.toml.inc": minimal})
	for name, target := range map[string]string{"leak.toml": secret, "ok.toml": "real.toml.inc", "dangling.toml": "nowhere"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	links, err := loadGuarded(t, dir, skipOwner)
	if strings.Contains(fmt.Sprint(err), "hunter") {
		t.Errorf("the secret leaked into the problems:\n%v", err)
	}
	want := []string{
		filepath.Join(dir, "dangling.toml") + ": is a symbolic link that cannot be followed: no such file or directory",
		filepath.Join(dir, "leak.toml") + fmt.Sprintf(": is a symbolic link to %q, outside %s; macake reads only files inside the policy directory: copy the file here instead of linking it", secret, dir),
	}
	var got []string
	for _, p := range Problems(err) {
		got = append(got, p.Error())
	}
	if !slices.Equal(got, want) || len(links) != 1 || links[0].Name != "ok" {
		t.Errorf("links %v, problems:\n%s\nwant:\n%s", links, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLoadChecksTheDirectoriesAbove: as root, a policy directory below a
// directory other users may write is refused, naming that directory, as
// ssh refuses a key below one; before, only the directory itself was
// checked (config/settings checks the settings file's the same way).
func TestLoadChecksTheDirectoriesAbove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the ownership checks apply to root")
	}
	open := filepath.Join(t.TempDir(), "open")
	dir := filepath.Join(open, "links.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"a.toml": minimal})
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("refusing to use: %s, above it, is writable by group or others (mode 0777), so another user could put their own files in its place; fix: sudo chown root %s && sudo chmod go-w %s", open, open, open)
	_, _, err := Load(dir, LoadOptions{})
	if probs := Problems(err); len(probs) != 1 || probs[0].Error() != dir+": "+want {
		t.Errorf("Load: %v\nwant %s: %s", err, dir, want)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if links, _, err := Load(dir, LoadOptions{}); err != nil || len(links) != 1 {
		t.Errorf("once fixed: %v", err)
	}
}

func TestFromCapacity(t *testing.T) {
	for _, tc := range []struct{ in, want units.Rate }{
		{312_400_000, 296 * units.Mbit},
		{21_300_000, 20 * units.Mbit},
		{5_260_000, 4900 * units.Kbit},
		{700_000, 665 * units.Kbit},
		{1, units.MinRate},
		{2 * units.MaxRate, units.MaxRate / units.Mbit * units.Mbit},
	} {
		if got := FromCapacity(tc.in); got != tc.want {
			t.Errorf("FromCapacity(%d) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
