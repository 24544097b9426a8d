// SPDX-License-Identifier: Apache-2.0

// Command testsummary stands between `go test -json` and a person: with
// -record FILE it prints what plain `go test` prints and appends each
// skipped test to FILE; with -report FILE it prints how many tests were
// skipped, and how many of them for want of root. .ci/test-packages runs
// it around every package, so `make test` says what did not run.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/macake/macake/internal/testjson"
)

func main() {
	record := flag.String("record", "", "append the skipped tests of the `go test -json` stream on stdin to `FILE`")
	report := flag.String("report", "", "summarise the skipped tests recorded in `FILE`")
	flag.Parse()
	switch {
	case *record != "":
		skips, err := testjson.Filter(bufio.NewReader(os.Stdin), os.Stdout)
		if err == nil {
			err = appendSkips(*record, skips)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
			os.Exit(1)
		}
	case *report != "":
		skips, err := readSkips(*report)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
			os.Exit(1)
		}
		testjson.WriteSummary(os.Stdout, skips)
	default:
		fmt.Fprintln(os.Stderr, "usage: go test -json PKG | testsummary -record FILE; testsummary -report FILE")
		os.Exit(2)
	}
}

func appendSkips(path string, skips []testjson.Skip) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, s := range skips {
		if err := enc.Encode(s); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func readSkips(path string) ([]testjson.Skip, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var skips []testjson.Skip
	dec := json.NewDecoder(f)
	for dec.More() {
		var s testjson.Skip
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		skips = append(skips, s)
	}
	return skips, nil
}
