// SPDX-License-Identifier: Apache-2.0

package logging_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/logging"
)

// readLog returns the lines of the current file and its old files, oldest
// first, and checks that every file holds whole lines only.
func readLog(t *testing.T, path string, keep int) (lines []string, files int) {
	t.Helper()
	for n := keep; n >= 0; n-- {
		name := path
		if n > 0 {
			name = fmt.Sprintf("%s.%d", path, n)
		}
		b, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		files++
		if len(b) > 0 && b[len(b)-1] != '\n' {
			t.Errorf("%s ends inside a line: %q", name, b[max(0, len(b)-20):])
		}
		for l := range strings.Lines(string(b)) {
			lines = append(lines, strings.TrimSuffix(l, "\n"))
		}
	}
	return lines, files
}

func TestFileRotatesAtCapWithoutSplittingLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.log")
	const maxBytes, keep = 100, 3
	f, err := logging.OpenFile(path, logging.FileOptions{MaxBytes: maxBytes, Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	for i := range 40 {
		// Lines of 13..28 bytes, so the cap falls inside lines, not only
		// between them.
		line := fmt.Sprintf("line %02d %s", i, strings.Repeat("x", i%16))
		want = append(want, line)
		if _, err := f.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	got, files := readLog(t, path, keep+2)
	if files != keep+1 {
		t.Errorf("%d files on disk, want the current one and %d old ones", files, keep)
	}
	if _, err := os.Stat(fmt.Sprintf("%s.%d", path, keep+1)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old file %d kept beyond Keep=%d (stat: %v)", keep+1, keep, err)
	}
	for n := range keep + 1 {
		name := path
		if n > 0 {
			name = fmt.Sprintf("%s.%d", path, n)
		}
		if fi, err := os.Stat(name); err != nil || fi.Size() > maxBytes {
			t.Errorf("%s: %v, size over the %d-byte cap", name, err, maxBytes)
		}
	}
	// What survives is exactly the newest lines, in order.
	if tail := want[len(want)-len(got):]; !slicesEqual(got, tail) {
		t.Errorf("lines on disk:\n%q\nwant the newest %d written:\n%q", got, len(tail), tail)
	}
	if len(got) < 10 {
		t.Errorf("only %d lines survive in %d files of %d bytes", len(got), files, maxBytes)
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFileLineLongerThanCapIsWrittenWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.log")
	f, err := logging.OpenFile(path, logging.FileOptions{MaxBytes: 50, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	long := strings.Repeat("L", 120)
	for _, l := range []string{"short one", long, "after"} {
		if _, err := f.Write([]byte(l + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := readLog(t, path, 2)
	if !slicesEqual(got, []string{"short one", long, "after"}) {
		t.Errorf("got %q", got)
	}
	if b, _ := os.ReadFile(path + ".1"); string(b) != long+"\n" {
		t.Errorf("the long line should sit alone in watch.log.1, got %q", b)
	}
}

func TestFileConcurrentWritersLoseNoLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.log")
	const writers, perWriter = 8, 300
	f, err := logging.OpenFile(path, logging.FileOptions{MaxBytes: 2048, Keep: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				fmt.Fprintf(f, "writer=%d seq=%03d pad=%s.\n", w, i, strings.Repeat("p", (w*7+i)%40))
			}
		})
	}
	wg.Wait()
	f.Close()
	lines, files := readLog(t, path, 1000)
	if files < 10 {
		t.Errorf("only %d files: the test did not exercise rotation", files)
	}
	lineRE := regexp.MustCompile(`^writer=(\d) seq=(\d{3}) pad=(p*)\.$`)
	seen := map[string]bool{}
	next := make([]int, writers)
	for _, l := range lines {
		m := lineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("torn line %q", l)
		}
		w, _ := strconv.Atoi(m[1])
		i, _ := strconv.Atoi(m[2])
		if len(m[3]) != (w*7+i)%40 || seen[l] {
			t.Fatalf("torn or duplicated line %q", l)
		}
		seen[l] = true
		// Each writer's lines stay in its own order across files.
		if i != next[w] {
			t.Fatalf("writer %d: line %d follows line %d", w, i, next[w]-1)
		}
		next[w]++
	}
	if len(seen) != writers*perWriter {
		t.Errorf("%d lines on disk, wrote %d", len(seen), writers*perWriter)
	}
}

func TestFileCreatesDirAndFileWithModesDespiteUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "var", "log", "macake", "watch.log")
	f, err := logging.OpenFile(path, logging.FileOptions{MaxBytes: 10, Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, "first line")
	fmt.Fprintln(f, "second line, after a rotation")
	for name, want := range map[string]fs.FileMode{
		filepath.Dir(path): 0o755 | fs.ModeDir,
		path:               0o644,
		path + ".1":        0o644,
	} {
		fi, err := os.Stat(name)
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", name, fi.Mode(), err, want)
		}
	}
}

func TestFileKeepsExistingFileAndAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.log")
	if err := os.WriteFile(path, []byte("from launchd\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	f, err := logging.OpenFile(path, logging.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "from macake")
	f.Close()
	b, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if string(b) != "from launchd\nfrom macake\n" || fi.Mode() != 0o640 {
		t.Errorf("existing file: %q mode %v; want it appended to and its mode kept", b, fi.Mode())
	}
}

func TestFileRotationFailureKeepsWritingAndRetriesLater(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "watch.log")
	// A non-empty directory where the oldest file goes cannot be removed,
	// even by root, so rotation fails.
	blocker := path + ".1"
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var failures []error
	f, err := logging.OpenFile(path, logging.FileOptions{MaxBytes: 40, Keep: 1, OnError: func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 6 {
		fmt.Fprintf(f, "line %d 0123456789\n", i) // 18 bytes
	}
	b, _ := os.ReadFile(path)
	if strings.Count(string(b), "\n") != 6 {
		t.Fatalf("lines were lost while rotation failed: %q", b)
	}
	// The cap is crossed at line 2 (36+18 > 40); the retry waits for
	// another 40 bytes (line 5), not every line.
	mu.Lock()
	n := len(failures)
	mu.Unlock()
	if n != 2 || !strings.Contains(failures[0].Error(), "rotate log file") {
		t.Fatalf("reported %d failures (%v); want 2: at the cap and one cap later", n, failures)
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	for i := 6; i < 9; i++ {
		fmt.Fprintf(f, "line %d 0123456789\n", i)
	}
	lines, files := readLog(t, path, 1)
	if files != 2 || len(lines) != 9 || lines[8] != "line 8 0123456789" {
		t.Errorf("after the obstacle went: %d files, lines %q", files, lines)
	}
}

func TestFileReopenAfterExternalRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.log")
	f, err := logging.OpenFile(path, logging.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, "before")
	// newsyslog or logrotate moves the file away, then signals.
	if err := os.Rename(path, path+".0"); err != nil {
		t.Fatal(err)
	}
	if err := f.Reopen(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "after")
	if b, _ := os.ReadFile(path); string(b) != "after\n" {
		t.Errorf("new file holds %q", b)
	}
	if b, _ := os.ReadFile(path + ".0"); string(b) != "before\n" {
		t.Errorf("moved file holds %q", b)
	}
}

func TestFileLoweredKeepDeletesLeftovers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.log")
	for n := 1; n <= 6; n++ {
		os.WriteFile(fmt.Sprintf("%s.%d", path, n), []byte("old\n"), 0o644)
	}
	f, err := logging.OpenFile(path, logging.FileOptions{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, "now")
	if err := f.Rotate(); err != nil {
		t.Fatal(err)
	}
	for n := 3; n <= 6; n++ {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", path, n)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s.%d survived with Keep=2", path, n)
		}
	}
	if b, _ := os.ReadFile(path + ".1"); string(b) != "now\n" {
		t.Errorf("watch.log.1 = %q", b)
	}
}

func TestFileBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		opts logging.FileOptions
		want string
	}{
		{"", logging.FileOptions{}, "empty path"},
		{filepath.Join(dir, "a.log"), logging.FileOptions{MaxBytes: -1}, "negative"},
		{filepath.Join(dir, "b.log"), logging.FileOptions{Keep: -1}, "cannot keep -1"},
		{dir, logging.FileOptions{}, "is a directory"},
		// Rotating would rename the device: refuse it.
		{"/dev/null", logging.FileOptions{}, "not a regular file"},
	} {
		if _, err := logging.OpenFile(tc.path, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenFile(%q, %+v) = %v; want an error saying %q", tc.path, tc.opts, err, tc.want)
		}
	}
	f, err := logging.OpenFile(filepath.Join(dir, "c.log"), logging.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := f.Write([]byte("late\n")); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
}

const crashHelperEnv = "MACAKE_LOGGING_CRASH_HELPER"

// TestCrashHelper is not a test on its own: TestCrashOutputFollowsRotation
// runs it in a child process that logs, rotates and then panics.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashHelperEnv)
	if path == "" {
		t.Skip("helper process for TestCrashOutputFollowsRotation")
	}
	f, err := logging.OpenFile(path, logging.FileOptions{MaxBytes: 30, Keep: 2, CrashOutput: true})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "first line, fills the file")
	fmt.Fprintln(f, "second line, in a new file")
	panic("controller exploded")
}

func TestCrashOutputFollowsRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.log")
	res, err := execrun.Exec{Env: []string{crashHelperEnv + "=" + path}}.Run(context.Background(),
		execrun.Command{Argv: []string{os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Fatalf("helper did not crash: %s", res.Stdout)
	}
	cur, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if !bytes.HasPrefix(cur, []byte("second line, in a new file\n")) || !bytes.Contains(cur, []byte("panic: controller exploded")) {
		t.Errorf("the current log file should end with the crash report, got:\n%s", cur)
	}
	if bytes.Contains(old, []byte("panic")) {
		t.Errorf("the crash report went to the rotated file:\n%s", old)
	}
}
