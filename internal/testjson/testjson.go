// SPDX-License-Identifier: Apache-2.0

// Package testjson reads `go test -json` and prints what plain `go test`
// prints (each package's result line, and the output of the tests that
// failed), while it keeps the tests that were skipped and why. `make
// test` run without root passes with every kernel test skipped; the
// count of skips, which plain `go test` hides behind "ok", says how much
// of the suite did not run (Skips.WriteSummary).
package testjson

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// Skip is one skipped test and what it said.
type Skip struct {
	Package, Test string
	// Reason is the test's message (t.Skip's), without the file:line.
	Reason string
}

// NeedsRoot reports whether the test skipped for want of root: the
// kernel tests (network namespaces, tc, pf) say so, as the project's
// tests must ("skip with a clear message when not root").
func (s Skip) NeedsRoot() bool {
	return rootWord.MatchString(s.Reason)
}

// rootWord is "root" as a word, not inside a test's name
// ("TestMeasurementsOnlyFromRoot").
var rootWord = regexp.MustCompile(`(?i)\broot\b`)

// Filter copies the stream r as plain `go test` would have printed it to
// w and returns the tests that skipped, in order.
func Filter(r io.Reader, w io.Writer) ([]Skip, error) {
	var skips []Skip
	held := map[string][]string{} // a running test's output, shown if it fails
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not JSON: go test's own complaint (a bad flag, no such
			// package). Pass it on as it is.
			fmt.Fprintln(w, sc.Text())
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" {
				fmt.Fprint(w, e.Output)
			}
		case e.Action == "output":
			held[key] = append(held[key], e.Output)
		case e.Action == "fail":
			fmt.Fprint(w, strings.Join(held[key], ""))
			delete(held, key)
		case e.Action == "skip" && e.Test == "":
			// A package without test files: nothing was skipped.
		case e.Action == "skip":
			skips = append(skips, Skip{Package: e.Package, Test: e.Test, Reason: reason(held[key])})
			delete(held, key)
		case e.Action == "pass":
			delete(held, key)
		}
	}
	return skips, sc.Err()
}

// reason is a skipped test's message: its log lines ("    x_test.go:12:
// message"), without the place.
func reason(out []string) string {
	var msg []string
	for _, l := range out {
		if !strings.HasPrefix(l, "    ") {
			continue
		}
		l = strings.TrimSpace(l)
		if _, after, ok := strings.Cut(l, ": "); ok && strings.Contains(l[:len(l)-len(after)], ".go:") {
			l = after
		}
		msg = append(msg, l)
	}
	return strings.Join(msg, " ")
}

// WriteSummary writes the line that makes skipped tests visible: how
// many were skipped, how many of them for want of root, and by package,
// with the reasons of the first few. Nothing when none was.
func WriteSummary(w io.Writer, skips []Skip) {
	if len(skips) == 0 {
		return
	}
	root := 0
	byPkg := map[string]int{}
	reasons := map[string]int{}
	for _, s := range skips {
		if s.NeedsRoot() {
			root++
		}
		byPkg[s.Package]++
		reasons[s.Reason]++
	}
	fmt.Fprintf(w, "!! %d tests skipped", len(skips))
	if root > 0 {
		fmt.Fprintf(w, ", %d of them kernel tests that need root: they did not run (run the tests as root to run them)", root)
	}
	fmt.Fprintln(w)
	pkgs := make([]string, 0, len(byPkg))
	for p := range byPkg {
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool {
		if byPkg[pkgs[i]] != byPkg[pkgs[j]] {
			return byPkg[pkgs[i]] > byPkg[pkgs[j]]
		}
		return pkgs[i] < pkgs[j]
	})
	for _, p := range pkgs {
		fmt.Fprintf(w, "!!   %4d  %s\n", byPkg[p], p)
	}
	why := make([]string, 0, len(reasons))
	for r := range reasons {
		why = append(why, r)
	}
	slices.SortFunc(why, func(a, b string) int {
		if reasons[a] != reasons[b] {
			return reasons[b] - reasons[a]
		}
		return strings.Compare(a, b)
	})
	for i, r := range why {
		if i == 3 {
			fmt.Fprintf(w, "!!   … and %d other reasons\n", len(why)-3)
			break
		}
		fmt.Fprintf(w, "!!   %4d× %s\n", reasons[r], r)
	}
}
