// SPDX-License-Identifier: Apache-2.0

package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/logging"
	"github.com/macake/macake/shape"
)

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]logging.Format{"": logging.FormatText, "text": logging.FormatText, "JSON": logging.FormatJSON, " json ": logging.FormatJSON} {
		if got, err := logging.ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := logging.ParseFormat("logfmt"); err == nil || !strings.Contains(err.Error(), `want "text" or "json"`) {
		t.Errorf("ParseFormat(logfmt): %v", err)
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := logging.ParseLevel(in); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := logging.ParseLevel("verbose"); err == nil || !strings.Contains(err.Error(), "want debug, info, warn or error") {
		t.Errorf("ParseLevel(verbose): %v", err)
	}
}

func TestNewDefaultsToStderrText(t *testing.T) {
	var stderr bytes.Buffer
	l, err := logging.New(logging.Options{Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.File() != nil {
		t.Error("a file without a path")
	}
	l.Debug("hidden at the default level")
	l.Info("watch started", logging.KeyEvent, "start")
	out := stderr.String()
	if strings.Contains(out, "hidden") || !strings.Contains(out, `level=INFO msg="watch started" event=start`) {
		t.Errorf("stderr: %q", out)
	}
	if err := l.Reopen(); err != nil {
		t.Errorf("Reopen without a file: %v", err)
	}
}

func TestNewRejectsUnknownFormat(t *testing.T) {
	if _, err := logging.New(logging.Options{Format: "xml"}); err == nil {
		t.Error("accepted format xml")
	}
}

// The daemon's setup end to end: JSON lines into a rotating file, every
// line an object a log shipper can read, rotation included.
func TestNewJSONFileRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "macake", "watch.log")
	level := new(slog.LevelVar)
	l, err := logging.New(logging.Options{Format: logging.FormatJSON, Level: level, Path: path,
		File: logging.FileOptions{MaxBytes: 1024, Keep: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ev := logging.Events{Log: l.Logger}
	for i := range 30 {
		ev.RateChanged(context.Background(), logging.RateChange{Link: "wan", Direction: shape.Download, FromBits: int64(90_000_000 - i), ToBits: int64(80_000_000 - i), Reason: "cut", Cut: true})
	}
	level.Set(slog.LevelWarn)
	ev.RateChanged(context.Background(), logging.RateChange{Link: "wan", FromBits: 2, ToBits: 1, Reason: "cut", Cut: true})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines, files := readLog(t, path, 2)
	if files != 3 {
		t.Errorf("%d files; 30 lines of ~300 bytes at a 1 KiB cap should fill the current and both old ones", files)
	}
	last := -1
	for _, line := range lines {
		var m struct {
			Event string `json:"event"`
			To    int64  `json:"to_bits_per_second"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if i := 80_000_000 - int(m.To); m.Event != "cut" || i <= last {
			t.Errorf("line out of order or wrong: %s", line)
		} else {
			last = i
		}
	}
	if last != 29 {
		t.Errorf("last line is cut %d; want 29 (the warn-level logger drops the info line)", last)
	}
}

// A rotation failure is reported inside the log itself, once, and logging
// goes on.
func TestNewReportsRotationTroubleInTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watch.log")
	if err := os.MkdirAll(filepath.Join(path+".1", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := logging.New(logging.Options{Path: path, File: logging.FileOptions{MaxBytes: 1000, Keep: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// 20 lines of about 80 bytes: the cap is crossed once, and the retry
	// waits for another 1000 bytes.
	for i := range 20 {
		l.Info("filler line to reach the cap", "i", i)
	}
	l.Close()
	b, _ := os.ReadFile(path)
	if n := strings.Count(string(b), "event=log_file"); n != 1 {
		t.Errorf("%d log_file lines; want 1:\n%s", n, b)
	}
	if !strings.Contains(string(b), "i=19") {
		t.Errorf("lines after the failure are missing:\n%s", b)
	}
}

// FuzzParseSettings: whatever a settings file says, parsing either fails
// with an error or yields a value that reads back the same.
func FuzzParseSettings(f *testing.F) {
	for _, s := range []string{"", "text", "JSON", "debug", "INFO+2", "warn-4", "err", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if format, err := logging.ParseFormat(s); err == nil && format != logging.FormatText && format != logging.FormatJSON {
			t.Errorf("ParseFormat(%q) = %q", s, format)
		}
		level, err := logging.ParseLevel(s)
		if err != nil {
			return
		}
		if again, err := logging.ParseLevel(level.String()); err != nil || again != level {
			t.Errorf("ParseLevel(%q) = %v, which reads back as %v, %v", s, level, again, err)
		}
	})
}
