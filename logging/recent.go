// SPDX-License-Identifier: Apache-2.0

package logging

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Record is one log line as Recent keeps it: its time, level, message and
// attributes in their text form ("event" and "link" among them).
type Record struct {
	Time    time.Time
	Level   slog.Level
	Message string
	// Attrs are the line's attributes in order, groups joined with ".".
	Attrs []Attr
}

// Attr is one attribute of a Record.
type Attr struct{ Key, Value string }

// Get returns the value of the attribute key, "" when the line has none.
func (r Record) Get(key string) string {
	for _, a := range r.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

// Recent is a slog.Handler that keeps the last lines at or above a level
// in memory, for the status page's list of events; Tee it beside the
// handler that writes the log. Safe for concurrent use.
type Recent struct {
	level slog.Leveler
	ring  *ring
	// attrs and group are what WithAttrs and WithGroup added.
	attrs []Attr
	group string
}

type ring struct {
	mu   sync.Mutex
	recs []Record
	next int
	full bool
}

// NewRecent keeps the last n lines at or above level (nil: info).
func NewRecent(n int, level slog.Leveler) *Recent {
	if level == nil {
		level = slog.LevelInfo
	}
	return &Recent{level: level, ring: &ring{recs: make([]Record, max(n, 1))}}
}

// Enabled implements slog.Handler.
func (h *Recent) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

// Handle implements slog.Handler: it keeps the line, dropping the oldest
// once full.
func (h *Recent) Handle(_ context.Context, r slog.Record) error {
	rec := Record{Time: r.Time, Level: r.Level, Message: r.Message, Attrs: slices.Clone(h.attrs)}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs = appendAttr(rec.Attrs, h.group, a)
		return true
	})
	g := h.ring
	g.mu.Lock()
	g.recs[g.next] = rec
	g.next = (g.next + 1) % len(g.recs)
	g.full = g.full || g.next == 0
	g.mu.Unlock()
	return nil
}

// WithAttrs implements slog.Handler.
func (h *Recent) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clone(h.attrs)
	for _, a := range as {
		c.attrs = appendAttr(c.attrs, h.group, a)
	}
	return &c
}

// WithGroup implements slog.Handler.
func (h *Recent) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = joinKey(h.group, name)
	return &c
}

// Last returns up to n of the kept lines, oldest first.
func (h *Recent) Last(n int) []Record {
	g := h.ring
	g.mu.Lock()
	defer g.mu.Unlock()
	var all []Record
	if g.full {
		all = append(slices.Clone(g.recs[g.next:]), g.recs[:g.next]...)
	} else {
		all = slices.Clone(g.recs[:g.next])
	}
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}

func appendAttr(out []Attr, group string, a slog.Attr) []Attr {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return out
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			out = appendAttr(out, joinKey(group, a.Key), g)
		}
		return out
	}
	return append(out, Attr{Key: joinKey(group, a.Key), Value: a.Value.String()})
}

func joinKey(group, key string) string {
	if group == "" {
		return key
	}
	return group + "." + key
}

// Tee returns a handler that hands every line to each of hs that is
// enabled for its level: the log file and Recent, say.
func Tee(hs ...slog.Handler) slog.Handler { return tee(hs) }

type tee []slog.Handler

func (t tee) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range t {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (t tee) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	for _, h := range t {
		if h.Enabled(ctx, r.Level) {
			errs = append(errs, h.Handle(ctx, r.Clone()))
		}
	}
	return errors.Join(errs...)
}

func (t tee) WithAttrs(as []slog.Attr) slog.Handler {
	out := make(tee, len(t))
	for i, h := range t {
		out[i] = h.WithAttrs(as)
	}
	return out
}

func (t tee) WithGroup(name string) slog.Handler {
	out := make(tee, len(t))
	for i, h := range t {
		out[i] = h.WithGroup(name)
	}
	return out
}
