// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/golden"
)

func samplePlan() Plan {
	return Plan{
		Warnings: []Warning{{Message: `foreign pipe 48500 inside the owned range 48001-48998 is left alone`}},
		Ops: []Op{
			{Link: "wan", Interface: "en0", Kind: "pipe", ID: "48001", Label: `pipe 48001 "wan/upload"`, Action: Update,
				Fields:    []Field{{Name: "bandwidth", Before: "480 Mbit/s", After: "500 Mbit/s", Key: "bandwidth_bits_per_second", BeforeValue: int64(480000000), AfterValue: int64(500000000)}},
				Unchanged: 3, Reason: "bandwidth differs",
				Commands: []execrun.Command{{Argv: []string{"/usr/sbin/dnctl", "pipe", "48001", "config", "bw", "500000Kbit/s", "queue", "256KBytes"}}}},
			{Link: "wan", Interface: "en0", Kind: "rules", ID: "com.apple/macake", Label: `anchor "com.apple/macake"`, Action: Update, Reason: "rules differ",
				Fields: []Field{{Name: "rules for wan", Before: "4 rules", After: "4 rules", Key: "rules_on_en0",
					BeforeValue: []string{"no dummynet quick on en0 inet proto icmp from any to 9.9.9.9", "no dummynet quick on en0 inet proto icmp from 9.9.9.9 to any", "dummynet out on en0 all pipe 48001", "dummynet in on en0 all pipe 48002"},
					AfterValue:  []string{"no dummynet quick on en0 inet proto icmp from any to 8.8.8.8", "no dummynet quick on en0 inet proto icmp from 8.8.8.8 to any", "dummynet out on en0 all pipe 48001", "dummynet in on en0 all pipe 48002"},
					Lines: []string{"- no dummynet quick on en0 inet proto icmp from any to 9.9.9.9", "- no dummynet quick on en0 inet proto icmp from 9.9.9.9 to any",
						"+ no dummynet quick on en0 inet proto icmp from any to 8.8.8.8", "+ no dummynet quick on en0 inet proto icmp from 8.8.8.8 to any"}}},
				Commands: []execrun.Command{{Argv: []string{"/sbin/pfctl", "-a", "com.apple/macake", "-f", "-"}, Stdin: "no dummynet quick on en0 inet proto icmp from any to 8.8.8.8\nno dummynet quick on en0 inet proto icmp from 8.8.8.8 to any\ndummynet out on en0 all pipe 48001\ndummynet in on en0 all pipe 48002\n"}}},
			{Link: "lte", Interface: "en5", Kind: "rules", ID: "com.apple/macake", Label: `4 rules for en5 in anchor "com.apple/macake"`, Action: Remove, Reason: "removed from config",
				Commands: []execrun.Command{{Argv: []string{"/sbin/pfctl", "-a", "com.apple/macake", "-f", "-"}, Stdin: "dummynet out on en0 all pipe 48001\ndummynet in on en0 all pipe 48002\n"}}},
			{Link: "lte", Interface: "en5", Kind: "pipe", ID: "48011", Label: `pipe 48011 "lte/upload"`, Action: Remove, Reason: "removed from config",
				Commands: []execrun.Command{{Argv: []string{"/usr/sbin/dnctl", "pipe", "delete", "48011"}}}},
			{Kind: "pf-reference", ID: "pf", Label: "pf enable reference", Action: Create, Reason: "pf is disabled",
				Fields:   []Field{{Name: "enabled", After: "yes", Key: "pf_enabled", AfterValue: true}},
				Commands: []execrun.Command{{Argv: []string{"/sbin/pfctl", "-E"}}}},
		},
	}
}

func matchGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got, "")
}

func TestWriteTextGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts TextOptions
	}{
		{"plan.txt", TextOptions{Symbols: true, SharedGroup: "pf"}},
		{"plan-commands.txt", TextOptions{Symbols: true, ShowCommands: true, DryRun: true, SharedGroup: "pf"}},
		{"plan-color.txt", TextOptions{Symbols: true, Color: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteText(&b, samplePlan(), tc.opts); err != nil {
				t.Fatal(err)
			}
			matchGolden(t, tc.name, b.Bytes())
		})
	}
}

func TestWriteTextNoChanges(t *testing.T) {
	var b bytes.Buffer
	WriteText(&b, Plan{}, TextOptions{Subject: "Live pf/dummynet state matches /etc/macake/links.d."})
	if got := b.String(); got != "No changes. Live pf/dummynet state matches /etc/macake/links.d.\n" {
		t.Fatalf("got %q", got)
	}
}

func TestWriteTextSummaryCounts(t *testing.T) {
	var b bytes.Buffer
	WriteText(&b, samplePlan(), TextOptions{})
	if !strings.HasSuffix(b.String(), "Plan: 1 to create, 2 to update, 2 to remove.\n") {
		t.Fatalf("summary line wrong:\n%s", b.String())
	}
	if strings.Contains(b.String(), "\x1b[") {
		t.Fatal("colour codes without Color")
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, samplePlan(), true, false, []error{errors.New("boom")}); err != nil {
		t.Fatal(err)
	}
	matchGolden(t, "plan.json", b.Bytes())
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["format_version"] != JSONFormatVersion || doc["dry_run"] != true {
		t.Fatalf("header wrong: %v", doc)
	}
	ch := doc["changes"].([]any)[0].(map[string]any)
	if ch["before"].(map[string]any)["bandwidth_bits_per_second"].(float64) != 480e6 ||
		ch["after"].(map[string]any)["bandwidth_bits_per_second"].(float64) != 500e6 {
		t.Fatalf("before/after in base units wrong: %v", ch)
	}
	var empty bytes.Buffer
	WriteJSON(&empty, Plan{}, true, false, nil)
	if !strings.Contains(empty.String(), `"changes": []`) || !strings.Contains(empty.String(), `"errors": []`) {
		t.Fatalf("empty plan must have empty arrays, not null:\n%s", empty.String())
	}
}
