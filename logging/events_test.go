// SPDX-License-Identifier: Apache-2.0

package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// fixedTime stamps every record with one instant so the output is stable.
type fixedTime struct{ slog.Handler }

var stamp = time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.UTC)

func (h fixedTime) Handle(ctx context.Context, r slog.Record) error {
	r.Time = stamp
	return h.Handler.Handle(ctx, r)
}
func (h fixedTime) WithAttrs(as []slog.Attr) slog.Handler { return fixedTime{h.Handler.WithAttrs(as)} }
func (h fixedTime) WithGroup(n string) slog.Handler       { return fixedTime{h.Handler.WithGroup(n)} }

// samplePlan is a reconcile with one update, one create and one remove.
func samplePlan() plan.Plan {
	return plan.Plan{
		Ops: []plan.Op{
			{Link: "wan", Interface: "en0", Kind: "pipe", ID: "48001", Label: `pipe 48001 "wan/upload"`, Action: plan.Update,
				Fields: []plan.Field{
					{Name: "bandwidth", Before: "480 Mbit/s", After: "500 Mbit/s", Key: "bandwidth_bits_per_second", BeforeValue: int64(480_000_000), AfterValue: int64(500_000_000)},
					{Name: "queue", Before: "256 KB", After: "300 KB", Key: "queue_bytes", BeforeValue: int64(262144), AfterValue: int64(307200)},
				},
				Unchanged: 1, Reason: "bandwidth differs",
				Commands: []execrun.Command{{Argv: []string{"/usr/sbin/dnctl", "pipe", "48001", "config", "bw", "500000Kbit/s", "queue", "300KBytes"}}}},
			{Link: "lte", Interface: "en5", Kind: "pipe", ID: "48003", Action: plan.Create,
				Fields: []plan.Field{{Name: "bandwidth", After: "20 Mbit/s", Key: "bandwidth_bits_per_second", AfterValue: int64(20_000_000)}},
				Reason: "new link"},
			{Link: "old", Kind: "rules", ID: "com.apple/macake", Action: plan.Remove, Reason: "removed from config"},
		},
		Warnings: []plan.Warning{
			{Link: "wan", Message: "foreign pipe 48990 in the owned range; left alone"},
			{Message: "pf was enabled by someone else"},
		},
	}
}

// logEverything writes one line of every event through ev.
func logEverything(ev logging.Events) {
	ctx := context.Background()
	p := samplePlan()
	ev.Change(ctx, p.Ops[0], nil)
	ev.Change(ctx, p.Ops[1], errors.New(`/usr/sbin/dnctl pipe 48003 config bw 20000Kbit/s: exit status 1: dnctl: invalid argument`))
	ev.Apply(ctx, logging.ApplyResult{Trigger: "config", Plan: p, Applied: 1, Duration: 12300 * time.Microsecond,
		Err: errors.New("pipe 48003: exit status 1")})
	ev.Apply(ctx, logging.ApplyResult{Trigger: "link_change", Plan: plan.Plan{Ops: p.Ops[:1]}, Applied: 1, Duration: 4 * time.Millisecond})
	ev.Apply(ctx, logging.ApplyResult{Trigger: "drift", Duration: time.Millisecond})
	ev.RateChanged(ctx, logging.RateChange{Link: "wan", Direction: shape.Download, FromBits: 80_000_000, ToBits: 62_400_000,
		Reason: "cut", Cut: true, AchievedBits: 79_100_000, Baseline: 12100 * time.Microsecond, Delay: 42300 * time.Microsecond})
	ev.RateChanged(ctx, logging.RateChange{Link: "wan", Direction: shape.Download, FromBits: 99_000_000, ToBits: 98_010_000,
		Reason: "decay", Baseline: 12100 * time.Microsecond})
	ev.RateChanged(ctx, logging.RateChange{Link: "wan", Direction: shape.Upload, FromBits: 20_000_000, ToBits: 20_800_000,
		Reason: "increase", AchievedBits: 19_500_000, Baseline: 9 * time.Millisecond, Delay: 2 * time.Millisecond})
	ev.Engage(ctx, "hotel", 4*time.Second, 18500*time.Microsecond)
	ev.Release(ctx, "hotel", 20*time.Second)
	ev.Stall(ctx, "wan", 2500*time.Millisecond)
	ev.Resume(ctx, "wan", 1_200_000, 300_000)
	ev.Sleep(ctx, "wan", 60*time.Second)
	ev.Wake(ctx, "wan", 5_000_000, 400_000)
	ev.SystemWake(ctx, 3*time.Hour+20*time.Minute)
	ev.ReflectorReplaced(ctx, "wan", netip.MustParseAddr("9.9.9.9"), netip.MustParseAddr("1.0.0.1"), "missed health checks")
	ev.ReflectorsSilent(ctx, "hotel", 30, 10*time.Second, "list reflectors that answer in [autorate] reflectors (macake doctor shows which do)")
	ev.ReflectorsAnswer(ctx, "hotel", 31)
	ev.LinkChanged(ctx, logging.LinkChange{Interface: "en0", From: "home", To: "hotspot", Reason: "gateway 74:24:9f:00:00:01 -> 02:00:00:00:00:02"})
	ev.LinkChanged(ctx, logging.LinkChange{Interface: "en5", From: "lte", Reason: "interface down"})
	ev.DriftRepaired(ctx, logging.Drift{Link: "wan", Kind: logging.DriftShaperMissing, Detail: "pipe 48001"})
	ev.DriftRepaired(ctx, logging.Drift{Kind: logging.DriftPFDisabled, Detail: "pf"})
	ev.DriftUnrepaired(ctx, logging.Drift{Kind: logging.DriftHookMissing, Detail: "/etc/pf.conf"},
		`add the line dummynet-anchor "com.apple/*" to /etc/pf.conf and run pfctl -f /etc/pf.conf`)
	ev.ConfigError(ctx, logging.ConfigProblem{File: "/etc/macake/links.d/wan.toml", Line: 7, Column: 12,
		Message: `download: "250mbps" is ambiguous; did you mean "250mbit"?`, Link: "wan", Kept: logging.KeptLastGood})
	ev.ConfigFixed(ctx, "wan", "/etc/macake/links.d/wan.toml")
}

func render(format logging.Format, level slog.Level) string {
	var buf bytes.Buffer
	logEverything(logging.Events{Log: slog.New(fixedTime{logging.NewHandler(&buf, format, level)})})
	return buf.String()
}

func matchGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got), "the log format is an interface people grep")
}

// The text format is what people read and grep: it must not drift.
func TestEventsTextGolden(t *testing.T) {
	matchGolden(t, "events.txt", render(logging.FormatText, slog.LevelDebug))
}

func TestEventsJSONGolden(t *testing.T) {
	matchGolden(t, "events.jsonl", render(logging.FormatJSON, slog.LevelDebug))
}

func TestEventsJSONLinesParse(t *testing.T) {
	out := render(logging.FormatJSON, slog.LevelDebug)
	events := map[string]bool{}
	for line := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON object: %v\n%s", err, line)
		}
		for _, k := range []string{"time", "level", "msg", "event"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line without %q: %s", k, line)
			}
		}
		events[m["event"].(string)] = true
	}
	for _, ev := range []logging.Event{logging.EventApply, logging.EventChange, logging.EventCut, logging.EventLower, logging.EventRaise,
		logging.EventEngage, logging.EventRelease, logging.EventStall, logging.EventResume, logging.EventSleep,
		logging.EventWake, logging.EventSystemWake, logging.EventReflector, logging.EventLinkChange,
		logging.EventDriftRepaired, logging.EventDriftUnrepaired, logging.EventConfigError, logging.EventConfigFixed} {
		if !events[string(ev)] {
			t.Errorf("no %q line", ev)
		}
	}
}

// A change line carries the same object as `macake apply --json`, so one
// tool reads both.
func TestChangeLineMatchesPlanJSON(t *testing.T) {
	p := samplePlan()
	doc := plan.Document(p, false, true, nil)
	for i, op := range p.Ops {
		var buf bytes.Buffer
		logging.Events{Log: slog.New(logging.NewHandler(&buf, logging.FormatJSON, nil))}.Change(context.Background(), op, nil)
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(doc.Changes[i])
		var want map[string]any
		json.Unmarshal(b, &want)
		delete(want, "commands")
		for _, k := range []string{"time", "level", "msg", "event"} {
			delete(line, k)
		}
		if !reflect.DeepEqual(line, want) {
			t.Errorf("op %d: log line %v\nplan JSON    %v", i, line, want)
		}
	}
}

func TestEventLevels(t *testing.T) {
	out := render(logging.FormatText, slog.LevelInfo)
	for _, hidden := range []string{"event=raise", "event=lower", "reason=decay", "result=no_changes"} {
		if strings.Contains(out, hidden) {
			t.Errorf("%s is logged at info level; it is debug noise", hidden)
		}
	}
	for _, want := range []string{
		"level=INFO msg=\"rate cut\" event=cut",
		"level=ERROR msg=\"change failed\" event=change",
		"level=ERROR msg=\"reconcile failed\" event=apply",
		"level=WARN msg=\"drift repaired\" event=drift_repaired",
		"level=ERROR msg=\"config error in force\" event=config_error",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

func TestApplyResult(t *testing.T) {
	p := samplePlan()
	for _, tc := range []struct {
		r    logging.ApplyResult
		want string
	}{
		{logging.ApplyResult{}, "no_changes"},
		{logging.ApplyResult{Plan: p, Applied: 3}, "applied"},
		{logging.ApplyResult{Plan: p, Applied: 1, Err: errors.New("boom")}, "failed"},
		{logging.ApplyResult{Err: errors.New("observe: pfctl not found")}, "failed"},
	} {
		if got := tc.r.Result(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}
