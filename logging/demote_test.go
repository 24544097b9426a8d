// SPDX-License-Identifier: Apache-2.0

package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestDemoteWritesInfoAtDebugOnly(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		log := slog.New(Demote(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))).With("link", "wan").WithGroup("g")
		log.Info("told elsewhere")
		log.Warn("a warning")
		out := buf.String()
		if !strings.Contains(out, "level=WARN") {
			t.Errorf("at %v the warning was lost: %q", level, out)
		}
		if got, want := strings.Contains(out, "told elsewhere"), level == slog.LevelDebug; got != want {
			t.Errorf("at %v the demoted Info line written: %v, want %v (%q)", level, got, want, out)
		}
		if level == slog.LevelDebug && !strings.Contains(out, "level=DEBUG msg=\"told elsewhere\" link=wan") {
			t.Errorf("the demoted line is not at Debug with its attributes: %q", out)
		}
	}
}
