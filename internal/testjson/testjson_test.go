// SPDX-License-Identifier: Apache-2.0

package testjson

import (
	"os"
	"strings"
	"testing"
)

// filterFile runs Filter over the recorded `go test -json` stream in
// file and returns what it printed and the skips it kept.
func filterFile(t *testing.T, file string) (string, []Skip) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	skips, err := Filter(f, &out)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), skips
}

// TestFilterPrintsWhatGoTestPrintsAndKeepsTheSkips: the stream of a
// package with a skipped test, a skipped subtest, a passing test and a
// failing one prints as plain `go test` would (the failure's output and
// the result line, nothing of what passed or skipped), and the two skips
// are kept with their reasons; a package without tests is no skip (issue
// 27, item 6).
func TestFilterPrintsWhatGoTestPrintsAndKeepsTheSkips(t *testing.T) {
	out, skips := filterFile(t, "testdata/skips.json")
	want := "=== RUN   TestFail\n    p_test.go:6: boom\n--- FAIL: TestFail (0.00s)\nFAIL\nFAIL\texample.org/m/p\t0.016s\n?   \texample.org/m/none\t[no test files]\n"
	if out != want {
		t.Errorf("printed\n%s\nwant\n%s", out, want)
	}
	if len(skips) != 2 || skips[0] != (Skip{Package: "example.org/m/p", Test: "TestRoot", Reason: "needs root: run it as root"}) ||
		skips[1].Test != "TestSub/a" || skips[1].Reason != "kernel lacks sch_cake" {
		t.Errorf("skips %+v", skips)
	}
	if !skips[0].NeedsRoot() || skips[1].NeedsRoot() {
		t.Errorf("NeedsRoot: %v, %v", skips[0].NeedsRoot(), skips[1].NeedsRoot())
	}
	if (Skip{Reason: "started by TestMeasurementsOnlyFromRoot"}).NeedsRoot() {
		t.Error("a test's name is no reason about root")
	}
}

func TestFilterShowsABuildFailure(t *testing.T) {
	out, _ := filterFile(t, "testdata/buildfail.json")
	for _, want := range []string{"q/q_test.go:3:28: undefined: undefined\n", "FAIL\texample.org/m/q [build failed]\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}

// TestSummaryIsLoud: skipped tests are counted, those needing root named
// as such, by package; none skipped says nothing.
func TestSummaryIsLoud(t *testing.T) {
	var b strings.Builder
	WriteSummary(&b, []Skip{
		{Package: "m/backend/tc", Test: "TestA", Reason: "needs root to make network namespaces"},
		{Package: "m/backend/tc", Test: "TestB", Reason: "needs root to make network namespaces"},
		{Package: "m/cmd", Test: "TestC", Reason: "zsh not installed"},
	})
	got := b.String()
	for _, want := range []string{
		"!! 3 tests skipped, 2 of them kernel tests that need root: they did not run",
		"!!      2  m/backend/tc\n", "!!      1  m/cmd\n",
		"!!      2× needs root to make network namespaces\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	WriteSummary(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no skips: %q", b.String())
	}
}
