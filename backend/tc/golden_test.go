// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/shape"
)

// goldenTools are the tool names recorded outputs are keyed by.
var goldenTools = Tools{TC: "tc", IP: "ip", Unshare: "unshare"}

// recording is a live.txtar file: the kernel capabilities and, per
// observation command, what it printed.
type recording struct {
	caps    Capabilities
	outputs map[string]string // argv joined by spaces → stdout
	order   []string
}

// readRecording reads and parses the recording in file, failing the
// test or fuzz target when it cannot.
func readRecording(tb testing.TB, file string) recording {
	tb.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := parseRecording(string(data))
	if err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
	return rec
}

func parseRecording(data string) (recording, error) {
	r := recording{outputs: map[string]string{}}
	var name string
	var body strings.Builder
	flush := func() error {
		if name == "" {
			return nil
		}
		if name == "caps.json" {
			if err := json.Unmarshal([]byte(body.String()), &r.caps); err != nil {
				return err
			}
		} else {
			r.outputs[name] = body.String()
			r.order = append(r.order, name)
		}
		body.Reset()
		return nil
	}
	for _, line := range strings.SplitAfter(data, "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") {
			if err := flush(); err != nil {
				return r, err
			}
			name = strings.TrimSuffix(strings.TrimPrefix(trimmed, "-- "), " --")
			continue
		}
		body.WriteString(line)
	}
	return r, flush()
}

func (r recording) runner() *replayRunner {
	rr := &replayRunner{answers: map[string]execrun.Result{}}
	for k, v := range r.outputs {
		rr.answers[k] = execrun.Result{Stdout: []byte(v)}
	}
	return rr
}

func readDesired(t *testing.T, path string) shape.State {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s shape.State
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// readOwned reads a case's ownership record (the interfaces whose root
// qdisc macake created, as the state file keeps them); none when the case
// has no owned.json.
func readOwned(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	if err := json.Unmarshal(b, &devs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]bool{}
	for _, d := range devs {
		out[d] = true
	}
	return out
}

// TestDiffGolden plans each testdata/diff case: desired.json against the
// recorded live.txtar (replayed through Observe, so the exact observation
// commands are checked too), and compares ops, commands and warnings with
// want.txt. Run with -update to rewrite want.txt after an intended change.
func TestDiffGolden(t *testing.T) {
	for _, desiredPath := range golden.Glob(t, "testdata/diff/*/desired.json") {
		dir := filepath.Dir(desiredPath)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rec := readRecording(t, filepath.Join(dir, "live.txtar"))
			desired := readDesired(t, filepath.Join(dir, "desired.json"))
			rr := rec.runner()
			live, err := Observe(context.Background(), rr, goldenTools)
			if err != nil {
				t.Fatalf("observe: %v", err)
			}
			live.Caps = rec.caps
			live.OwnedRoots = OwnedRoots(live, readOwned(t, filepath.Join(dir, "owned.json")))
			// hooks.json: the interfaces whose ingress qdisc macake added.
			live.OwnedHooks = readOwned(t, filepath.Join(dir, "hooks.json"))
			p := Diff(desired, live)
			got := formatPlan(p)
			golden.Check(t, filepath.Join(dir, "want.txt"), []byte(got), "the plan")
			for _, c := range rr.calls {
				if len(c.Argv) > 1 && (c.Argv[1] == "qdisc" || c.Argv[1] == "filter" || c.Argv[1] == "link") {
					t.Errorf("observation ran a command that is not read-only: %v", c.Argv)
				}
			}
			// Logs and doctor print "LABEL: REASON" for every op.
			for _, op := range p.Ops {
				if op.Reason == "" {
					t.Errorf("%s %s has no reason", op.Action, op.Label)
				}
			}
			// A plan's JSON is what `apply --json` prints: it must encode.
			if _, err := json.Marshal(p); err != nil {
				t.Errorf("plan does not encode as JSON: %v", err)
			}
		})
	}
}

// TestReflectorOrderChangesNothing replans every converged case with each
// link's reflectors reversed: the exemptions depend on the set, not the
// order, so watch (sorted) and a one-shot apply (the policy's order) agree.
func TestReflectorOrderChangesNothing(t *testing.T) {
	for _, desiredPath := range golden.Glob(t, "testdata/diff/*-converged/desired.json") {
		dir := filepath.Dir(desiredPath)
		rec := readRecording(t, filepath.Join(dir, "live.txtar"))
		live, err := Observe(context.Background(), rec.runner(), goldenTools)
		if err != nil {
			t.Fatal(err)
		}
		live.Caps = rec.caps
		desired := readDesired(t, desiredPath)
		for i := range desired.Links {
			slices.Reverse(desired.Links[i].Reflectors)
		}
		if p := Diff(desired, live); !p.Empty() {
			t.Errorf("%s: reversed reflectors give a plan:\n%s", filepath.Base(dir), formatPlan(p))
		}
	}
}
