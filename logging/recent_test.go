// SPDX-License-Identifier: Apache-2.0

package logging

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestRecentKeepsTheLastLines: the status page's event list holds the
// newest lines at info and above, with their attributes as the text log
// prints them, while the log itself still gets every line.
func TestRecentKeepsTheLastLines(t *testing.T) {
	var out bytes.Buffer
	rec := NewRecent(3, nil)
	log := slog.New(Tee(NewHandler(&out, FormatText, slog.LevelDebug), rec))
	ev := Events{Log: log.With("daemon", "watch")}
	log.Debug("not kept")
	for range 4 {
		ev.Stall(context.Background(), "wan", 0)
	}
	log.WithGroup("apply").Warn("reconcile failed", KeyError, errors.New("pfctl: boom"), slog.Group("plan", slog.Int("ops", 3)))
	got := rec.Last(10)
	if len(got) != 3 {
		t.Fatalf("kept %d lines, want the last 3: %+v", len(got), got)
	}
	last := got[2]
	if last.Message != "reconcile failed" || last.Level != slog.LevelWarn || last.Get("apply.error") != "pfctl: boom" || last.Get("apply.plan.ops") != "3" {
		t.Errorf("last line: %+v", last)
	}
	if first := got[0]; first.Get(KeyEvent) != string(EventStall) || first.Get(KeyLink) != "wan" || first.Get("daemon") != "watch" {
		t.Errorf("event line lost its attributes: %+v", first)
	}
	if n := len(rec.Last(1)); n != 1 {
		t.Errorf("Last(1) gave %d", n)
	}
	if !strings.Contains(out.String(), "not kept") || strings.Count(out.String(), "\n") != 6 {
		t.Errorf("the log itself lost lines:\n%s", out.String())
	}
}
