// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/backend/tc/tctest"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// TestPlanForOneLinkOnTC: on tc every object belongs to one link, so the
// plan for a link is the whole plan's ops of that link, and the plans of
// the two links together are the whole plan.
func TestPlanForOneLinkOnTC(t *testing.T) {
	ctx := context.Background()
	desired := golden.ReadJSON[shape.State](t, "../backend/tc/testdata/diff/htb-fresh/desired.json")
	run, err := tctest.ReadRecorded("../backend/tc/testdata/diff/htb-fresh/live.txtar")
	if err != nil {
		t.Fatal(err)
	}
	b := &tc.Backend{Runner: run, Tools: tc.ToolsFromEnv(func(string) string { return "" })}
	b.SetCapabilities(tc.Capabilities{HTB: true, BFIFO: true, Ingress: true, U32: true, Mirred: true, IFB: true, Method: "test"})
	all, err := planFor(ctx, b, desired, "")
	if err != nil {
		t.Fatal(err)
	}
	var union []string
	for _, link := range []string{"lan", "wan"} {
		p, err := planFor(ctx, b, desired, link)
		if err != nil {
			t.Fatal(err)
		}
		if p.Empty() {
			t.Fatalf("the plan for %s is empty", link)
		}
		for _, op := range p.Ops {
			if op.Link != link {
				t.Errorf("the plan for %s holds %s of %q", link, op.Label, op.Link)
			}
			union = append(union, op.Label)
		}
	}
	var whole []string
	for _, op := range all.Ops {
		whole = append(whole, op.Label)
	}
	slices.Sort(union)
	slices.Sort(whole)
	if !slices.Equal(union, whole) {
		t.Errorf("lan's and wan's plans together\n%q\nthe whole plan\n%q", union, whole)
	}
}

func TestScopedProblemsSlotsAndReleases(t *testing.T) {
	other := &desired.LinkError{Link: "lte", Err: errors.New("needs a measurement")}
	mine := &desired.LinkError{Link: "wan", Err: errors.New("no slot")}
	global := errors.New("settings")
	in := PassInput{Run: Run{Link: "wan", Store: &state.File{State: &state.State{Slots: map[string]int{"lte": 1, "old": 2}}}}}
	if got := Unjoin(in.scoped(errors.Join(other, mine, global))); len(got) != 2 || got[0] != mine || got[1] != global {
		t.Errorf("scoped problems: %v; want wan's and the settings', not lte's", got)
	}
	if in.scoped(errors.Join(other)) != nil {
		t.Error("another link's problem alone must not stop a pass on wan")
	}
	// wan gets its new slot; lte's stays; a new slot the desired state
	// gives someone else is not saved.
	got := in.scopedSlots(map[string]int{"wan": 0, "lte": 1, "new": 3})
	if want := map[string]int{"wan": 0, "lte": 1, "old": 2}; !maps.Equal(got, want) {
		t.Errorf("scoped slots %v, want %v", got, want)
	}
	if r := in.scopedReleased([]string{"old", "wan"}); !slices.Equal(r, []string{"wan"}) {
		t.Errorf("scoped releases %v", r)
	}
	if r := (PassInput{}).scopedReleased([]string{"old"}); !slices.Equal(r, []string{"old"}) {
		t.Errorf("unscoped releases %v", r)
	}
}

// TestSavedPlanRoundTrip: a saved plan reads back as it was written, the
// plan exactly (its fingerprint too), and its inputs' changes are named.
func TestSavedPlanRoundTrip(t *testing.T) {
	dir := t.TempDir()
	links := filepath.Join(dir, "links.d")
	os.Mkdir(links, 0o755)
	os.WriteFile(filepath.Join(links, "home.toml"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(links, ".home.toml.swp"), []byte("editor"), 0o644)
	prints, err := PolicyFingerprints(links)
	if err != nil || len(prints) != 1 {
		t.Fatalf("fingerprints %v, %v; want home.toml only", prints, err)
	}
	p := plan.Plan{Ops: []plan.Op{{Link: "home", Kind: "pipe", ID: "48001", Label: `pipe 48001 "home/upload"`, Action: plan.Update,
		Fields:   []plan.Field{{Name: "bandwidth", Before: "10 Mbit/s", After: "20 Mbit/s", Key: "bandwidth_bits_per_second", BeforeValue: int64(10e6), AfterValue: int64(20e6)}},
		Commands: nil}}, Warnings: []plan.Warning{{Link: "home", Message: "note"}}}
	sp := &SavedPlan{Format: SavedPlanFormat, Made: time.Unix(1, 0).UTC(), Backend: "pf", Link: "home",
		From:    Fingerprints{ConfigDir: links, Policies: prints, Network: map[string]string{"en0": "en0 up"}, Slots: map[string]int{"home": 0}, Live: LiveFingerprint(p)},
		Desired: shape.State{Links: []shape.Link{{Name: "home", Interface: "en0"}}}, Slots: map[string]int{"home": 0}, Plan: p}
	file := filepath.Join(dir, "p")
	if err := sp.Write(file); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSavedPlan(file)
	if err != nil {
		t.Fatal(err)
	}
	if back.Plan.Ops[0].Summary() != p.Ops[0].Summary() || back.Link != "home" || back.Desired.Links[0].Interface != "en0" {
		t.Errorf("read back %+v", back)
	}
	if got := back.liveChanges(p); got != nil {
		t.Errorf("the same plan against the same live state: %v", got)
	}
	changed := p
	changed.Ops = []plan.Op{p.Ops[0]}
	changed.Ops[0].Fields = []plan.Field{{Name: "bandwidth", Before: "15 Mbit/s", After: "20 Mbit/s"}}
	if got := back.liveChanges(changed); len(got) != 1 || !strings.Contains(got[0], "1 change of the plan no longer fits it ('~ pipe 48001 \"home/upload\": bandwidth 10 Mbit/s -> 20 Mbit/s')") || !strings.Contains(got[0], "it now needs 1 other ('~ pipe 48001 \"home/upload\": bandwidth 15 Mbit/s -> 20 Mbit/s')") {
		t.Errorf("live changes %q; want one line with what was planned and what is needed now", got)
	}
	os.WriteFile(filepath.Join(links, "home.toml"), []byte("y"), 0o644)
	now, _ := PolicyFingerprints(links)
	got := back.inputChanges("tc", links, now, linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: false}}}, map[string]int{"home": 0})
	if len(got) != 3 {
		t.Errorf("input changes %q; want the backend, home.toml and the network", got)
	}
	os.WriteFile(file, []byte(`{"format": 99}`), 0o600)
	if _, err := ReadSavedPlan(file); err == nil {
		t.Error("a plan of another format must be refused")
	}
}
