// SPDX-License-Identifier: Apache-2.0

package report_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/macake/macake/doctor"
	"github.com/macake/macake/doctor/report"
)

func sampleReport() report.Report {
	return report.Report{Results: []report.Result{
		{ID: "system.user", Section: doctor.SectionSystem, Name: "user", Status: report.Info, Message: "running as root"},
		{ID: "pf.status", Section: doctor.SectionPF, Name: "pf status", Status: report.OK, Message: "pf is enabled", Details: []string{"ok detail"}},
		{ID: "pf.hook", Section: doctor.SectionPF, Name: "hook line", Status: report.Problem, Message: "hook missing", Details: []string{"problem detail"},
			Fix: "add this line:\ndummynet-anchor \"com.apple/*\""},
		{ID: "pf.anchor", Section: doctor.SectionPF, Name: "anchor", Status: report.Skipped, Message: "needs root"},
		{ID: "daemon.installed", Section: doctor.SectionDaemon, Name: "service", Status: report.Warning, Message: "not installed", Fix: "sudo macake install-daemon"},
	}}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	report.WriteText(&b, sampleReport(), report.TextOptions{})
	want := `System
  i user: running as root

pf and dummynet
  ✓ pf status: pf is enabled
  ✗ hook line: hook missing
      problem detail
      fix: add this line:
          dummynet-anchor "com.apple/*"

Daemon
  ! service: not installed
      fix: sudo macake install-daemon

1 problem, 1 warning.
`
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWriteTextOptions(t *testing.T) {
	var b bytes.Buffer
	report.WriteText(&b, sampleReport(), report.TextOptions{ASCII: true, Verbose: true})
	out := b.String()
	for _, want := range []string{"  + pf status: pf is enabled\n      ok detail\n", "  x hook line:", "  ! service:", "  i user:"} {
		if !strings.Contains(out, want) {
			t.Errorf("ASCII, verbose: output lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "✓✗") {
		t.Errorf("ASCII output has UTF-8 marks:\n%s", out)
	}

	b.Reset()
	report.WriteText(&b, sampleReport(), report.TextOptions{Color: true})
	for _, want := range []string{"\x1b[32m✓\x1b[0m", "\x1b[31m✗\x1b[0m", "\x1b[33m!\x1b[0m", "\x1b[1mpf and dummynet\x1b[0m"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("colour output lacks %q", want)
		}
	}

	b.Reset()
	warnOnly := report.Report{Results: []report.Result{{Section: doctor.SectionDaemon, Name: "service", Status: report.Warning, Message: "m", Fix: "f"}}}
	report.WriteText(&b, warnOnly, report.TextOptions{Strict: true})
	if !strings.HasSuffix(b.String(), "0 problems, 1 warning. With --strict, warnings fail.\n") {
		t.Errorf("strict verdict:\n%s", b.String())
	}

	b.Reset()
	report.WriteText(&b, report.Report{Results: []report.Result{{Section: doctor.SectionSystem, Name: "os", Status: report.OK, Message: "macOS"}}}, report.TextOptions{})
	if !strings.HasSuffix(b.String(), "\nEverything looks fine.\n") {
		t.Errorf("healthy verdict:\n%s", b.String())
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := report.WriteJSON(&b, sampleReport(), true, false); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		FormatVersion string         `json:"format_version"`
		Strict        bool           `json:"strict"`
		Root          bool           `json:"root"`
		Summary       map[string]int `json:"summary"`
		Verdict       string         `json:"verdict"`
		Failed        bool           `json:"failed"`
		Checks        []map[string]any
	}
	dec := json.NewDecoder(&b)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decoding: %v\n%s", err, b.String())
	}
	if doc.FormatVersion != "1.0" || !doc.Strict || doc.Root || !doc.Failed || doc.Verdict != "1 problem, 1 warning." {
		t.Errorf("header: %+v", doc)
	}
	wantSummary := map[string]int{"ok": 1, "info": 1, "warnings": 1, "problems": 1, "skipped": 1}
	for k, v := range wantSummary {
		if doc.Summary[k] != v {
			t.Errorf("summary[%s] = %d, want %d", k, doc.Summary[k], v)
		}
	}
	if len(doc.Checks) != 5 {
		t.Fatalf("%d checks, want 5 (skipped ones included)", len(doc.Checks))
	}
	hook := doc.Checks[2]
	if hook["id"] != "pf.hook" || hook["status"] != "problem" || hook["section"] != doctor.SectionPF || !strings.Contains(hook["fix"].(string), "dummynet-anchor") {
		t.Errorf("hook check: %v", hook)
	}
	if doc.Checks[3]["status"] != "skipped" {
		t.Errorf("skipped check: %v", doc.Checks[3])
	}
	if _, has := doc.Checks[1]["fix"]; has {
		t.Errorf("an ok check has a fix: %v", doc.Checks[1])
	}
}

func TestReportVerdict(t *testing.T) {
	rep := func(statuses ...report.Status) report.Report {
		var r report.Report
		for _, s := range statuses {
			r.Results = append(r.Results, report.Result{Status: s})
		}
		return r
	}
	tests := []struct {
		rep                  report.Report
		verdict              string
		failed, failedStrict bool
	}{
		{rep(report.OK, report.Info, report.Skipped), "Everything looks fine.", false, false},
		{rep(report.OK, report.Warning), "0 problems, 1 warning.", false, true},
		{rep(report.Problem, report.Warning, report.Warning), "1 problem, 2 warnings.", true, true},
		{rep(report.Problem, report.Problem), "2 problems, 0 warnings.", true, true},
	}
	for _, tt := range tests {
		if got := tt.rep.Verdict(); got != tt.verdict {
			t.Errorf("Verdict() = %q, want %q", got, tt.verdict)
		}
		if got := tt.rep.Failed(false); got != tt.failed {
			t.Errorf("%q: Failed(false) = %v", tt.verdict, got)
		}
		if got := tt.rep.Failed(true); got != tt.failedStrict {
			t.Errorf("%q: Failed(true) = %v", tt.verdict, got)
		}
	}
}

// TestStatusWords: the words of the JSON document, and a legible value for
// a status that has none.
func TestStatusWords(t *testing.T) {
	for s, want := range map[report.Status]string{
		report.OK: "ok", report.Info: "info", report.Warning: "warning", report.Problem: "problem", report.Skipped: "skipped",
		report.Status(9): "status(9)", report.Status(-1): "status(-1)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d) = %q, want %q", int(s), got, want)
		}
	}
}
