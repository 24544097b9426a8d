// SPDX-License-Identifier: Apache-2.0

// Package golden is the tests' one way to compare output with a file in
// testdata and to rewrite it after an intended change: `go test ./PKG
// -update`. It also finds the fixtures a table test runs over, and fails
// when there are none, so that a moved testdata directory cannot turn a
// test into one that checks nothing, and reads a JSON fixture.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// Check compares got with the file at path, or with -update writes got
// there (creating its directory). why, when not empty, says what the file
// is a contract of, for the failure message.
func Check(tb testing.TB, path string, got []byte, why string) {
	tb.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		if why != "" {
			why += "; "
		}
		tb.Errorf("%s differs (%srun the test with -update if the change is intended)\n--- got ---\n%s\n--- want ---\n%s", path, why, got, want)
	}
}

// Glob returns the files matching pattern, sorted, and fails the test when
// there are none.
func Glob(tb testing.TB, pattern string) []string {
	tb.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		tb.Fatalf("no fixtures match %s (%v): the test would check nothing", pattern, err)
	}
	sort.Strings(files)
	return files
}

// ReadJSON decodes the JSON file at path into a T and fails the test,
// naming the file, when it cannot.
func ReadJSON[T any](tb testing.TB, path string) T {
	tb.Helper()
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return v
}
