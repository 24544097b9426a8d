// SPDX-License-Identifier: Apache-2.0

package logging

import (
	"context"
	"log/slog"
)

// Demote returns a handler that writes h's Info records at Debug and
// every other record as it is: for lines another line already tells,
// which a reader wants only when debugging.
func Demote(h slog.Handler) slog.Handler { return demoted{h} }

// demoted logs Info records at Debug (and everything else as it is).
type demoted struct{ slog.Handler }

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (h demoted) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, demote(l))
}

func (h demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h demoted) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoted{h.Handler.WithAttrs(attrs)}
}

func (h demoted) WithGroup(name string) slog.Handler { return demoted{h.Handler.WithGroup(name)} }
