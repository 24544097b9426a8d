// SPDX-License-Identifier: Apache-2.0

package check

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/golden"
)

// scripted answers each command line from a table (missing lines fail to
// run), and records what it was asked.
type scripted struct {
	answers map[string]execrun.Result
	asked   []string
}

func (s *scripted) Run(_ context.Context, cmd execrun.Command) (execrun.Result, error) {
	line := cmd.String()
	s.asked = append(s.asked, line)
	res, ok := s.answers[line]
	if !ok {
		return execrun.Result{ExitCode: -1}, &execrun.Error{Argv: cmd.Argv, ExitCode: -1, Err: context.DeadlineExceeded}
	}
	return res, nil
}

func out(stdout string, exit int) execrun.Result {
	return execrun.Result{Stdout: []byte(stdout), ExitCode: exit}
}

var upper = Normalizer{Name: "case", Apply: func(a Answer, _ Vars) Answer { a.Stdout = strings.ToUpper(a.Stdout); return a }}

func sides() (*scripted, *scripted, *Side, *Side) {
	real := &scripted{answers: map[string]execrun.Result{
		"/bin/tool show 7":  out("seven\n", 0),
		"/bin/tool set 7":   out("", 0),
		"/bin/tool round 7": out("1.234\nkept\n", 0),
		"/bin/tool gone 7":  out("", 1),
		"/bin/tool token":   out("Token : 11\n", 0),
		"/bin/tool use 11":  out("used\n", 0),
	}}
	emu := &scripted{answers: map[string]execrun.Result{
		"tool show 7":  out("SEVEN\n", 0),
		"tool set 7":   out("", 0),
		"tool round 7": out("1.235\nkept\n", 0),
		"tool gone 7":  out("", 0),
		"tool token":   out("Token : 22\n", 0),
		"tool use 22":  out("used\n", 0),
	}}
	return real, emu,
		&Side{Name: "real", Runner: real, Real: true, Vars: Vars{"tool": "/bin/tool", "n": "7"}},
		&Side{Name: "emulator", Runner: emu, Vars: Vars{"tool": "tool", "n": "7"}}
}

func call(args ...string) Call { return Call{Argv: append([]string{"{tool}"}, args...)} }

func TestRunComparesSkipsAndCaptures(t *testing.T) {
	real, emu, rs, es := sides()
	token := func(a Answer, s *Side) error {
		s.Vars["tok"] = strings.TrimSpace(strings.TrimPrefix(a.Stdout, "Token : "))
		return nil
	}
	checks := []Check{
		{ID: "a.same", Fact: "equal after normalising", Ref: "§1", Steps: []Step{{Call: call("show", "{n}"), Normalize: []Normalizer{upper}}}},
		{ID: "a.rounding", Fact: "the second step differs, the third still runs", Steps: []Step{
			{Call: call("set", "{n}")}, {Call: call("round", "{n}")}, {Call: call("set", "{n}")}}},
		{ID: "a.exit", Fact: "an exit status differs", Steps: []Step{{Call: call("gone", "{n}")}}},
		{ID: "a.needs", Fact: "needs a differing check", Needs: []string{"a.rounding"}, Steps: []Step{{Call: call("show", "{n}")}}},
		{ID: "a.skip", Fact: "cannot run here", Skip: func() string { return "not on this OS" }},
		{ID: "a.capture", Fact: "each side uses its own token", Steps: []Step{
			{Call: call("token"), Capture: token, Normalize: []Normalizer{{Name: "token", Apply: func(a Answer, _ Vars) Answer { a.Stdout = "Token : <T>\n"; return a }}}},
			{Call: call("use", "{tok}")}}},
		{ID: "a.missing", Fact: "a placeholder nobody captured", Steps: []Step{{Call: call("use", "{nothing}")}}},
		{ID: "a.accept", Fact: "an answer macake cannot read", Steps: []Step{{Call: call("show", "{n}"), Normalize: []Normalizer{upper},
			Accept: func(a Answer, s *Side) error {
				if s.Real {
					return context.Canceled
				}
				return nil
			}}}},
		{ID: "a.probe", Fact: "a probe returns its own result", Probe: func(context.Context) Result {
			return Result{Status: OK, Real: "19.8 Mbit/s", Expected: "20.0 Mbit/s"}
		}},
	}
	var streamed []string
	res, interrupted := Run(context.Background(), checks, rs, es, func(r Result) { streamed = append(streamed, r.ID) })
	if interrupted || len(res) != len(checks) || len(streamed) != len(checks) {
		t.Fatalf("%d results, %d streamed, interrupted %v", len(res), len(streamed), interrupted)
	}
	want := map[string]Status{"a.same": OK, "a.rounding": Differs, "a.exit": Differs, "a.needs": Skipped, "a.skip": Skipped,
		"a.capture": OK, "a.missing": Error, "a.accept": Differs, "a.probe": OK}
	for _, r := range res {
		if r.Status != want[r.ID] {
			t.Errorf("%s: %s (%s), want %s", r.ID, r.Status, r.Detail, want[r.ID])
		}
	}
	if r, _ := find(res, "a.rounding"); len(r.Steps) != 3 || !strings.HasPrefix(r.Detail, "step 2 (/bin/tool round 7): stdout differ") {
		t.Errorf("rounding: %d steps, %q", len(r.Steps), r.Detail)
	}
	if r, _ := find(res, "a.needs"); r.Detail != "needs a.rounding (differs)" {
		t.Errorf("needs: %q", r.Detail)
	}
	if got := strings.Join(emu.asked, ";"); !strings.Contains(got, "tool use 22") || !strings.Contains(strings.Join(real.asked, ";"), "/bin/tool use 11") {
		t.Errorf("the sides must use their own captures: %s | %s", real.asked, emu.asked)
	}
	if s := Summarize(res); s != (Summary{OK: 3, Differs: 3, Skipped: 2, Errors: 1}) {
		t.Errorf("summary %+v", s)
	}

	// The labels point to a page an installed user can read, not to a
	// file of a source tree (issue 27, item 13).
	rep := &Report{Suite: "test", Real: "/bin/tool", Expected: "a script", Setup: []string{"nothing to set up"},
		Results: res, Cleanup: []string{"removed nothing"}, Took: Duration(1500 * time.Millisecond), Labels: "https://example.org/docs/TEST.md"}
	var b bytes.Buffer
	rep.WriteText(&b)
	golden.Check(t, "testdata/report.txt", b.Bytes(), "the selftest's text report")
	if rep.OK() {
		t.Error("a report with differences is not OK")
	}
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil || !strings.Contains(b.String(), `"real_normalized"`) || !strings.Contains(b.String(), `"took": "1.5s"`) {
		t.Errorf("json: %v\n%s", err, b.String())
	}
}

// TestRunStopsWhenInterrupted: a cancelled context ends the run before
// the next check, and the check it cancelled is skipped, not failed.
func TestRunStopsWhenInterrupted(t *testing.T) {
	_, _, rs, es := sides()
	ctx, cancel := context.WithCancel(context.Background())
	checks := []Check{
		{ID: "b.first", Steps: []Step{{Call: call("show", "{n}"), Normalize: []Normalizer{upper}}}},
		{ID: "b.cancel", Steps: []Step{{Call: call("hang"), Before: func(context.Context, *Side) error { cancel(); return nil }}}},
		{ID: "b.never", Steps: []Step{{Call: call("show", "{n}")}}},
	}
	res, interrupted := Run(ctx, checks, rs, es, nil)
	if !interrupted || len(res) != 2 || res[0].Status != OK || res[1].Status != Skipped || res[1].Detail != "interrupted" {
		t.Fatalf("interrupted %v, results %+v", interrupted, res)
	}
}

// find returns the result with id.
func find(results []Result, id string) (Result, bool) {
	i := slices.IndexFunc(results, func(r Result) bool { return r.ID == id })
	if i < 0 {
		return Result{}, false
	}
	return results[i], true
}
