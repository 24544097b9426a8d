// SPDX-License-Identifier: Apache-2.0

// Package logging builds the daemon's structured logger (log/slog, text or
// JSON lines) and holds the vocabulary of what `macake watch` logs.
//
// # Where lines go
//
// New writes to standard error by default: under systemd that is the
// journal. With a file path it writes to a File, which rotates itself at a
// size cap and keeps a few old files, so a daemon left running for months
// never fills the disk; launchd itself never rotates, which is why the
// LaunchDaemon runs watch with --log-file /var/log/macake/watch.log.
//
// # What a line says
//
// Every line the daemon writes about something that happened carries an
// "event" attribute from the Event constants, and "link" when it concerns a
// link, so people can grep and programs can filter without parsing
// messages. The Events methods write those lines: one per applied change,
// one summary per reconcile, one per controller event (cut, raise, engage,
// release, stall, resume, sleep, wake), link change, drift repair, and
// config error in force. Numbers are in base units with the unit in the
// key (bits_per_second, seconds, bytes), as in `macake apply --json`.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// Format is how log lines are written.
type Format string

// The two formats: logfmt-style key=value text for people, and one JSON
// object per line for log shippers (the same keys either way).
const (
	FormatText Format = "text"
	FormatJSON Format = "json"
)

// ParseFormat reads a log_format setting: "text" or "json" (any case); ""
// means text.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "text":
		return FormatText, nil
	case "json":
		return FormatJSON, nil
	}
	return "", fmt.Errorf("log format %q: want \"text\" or \"json\"", s)
}

// ParseLevel reads a log level: "debug", "info", "warn" or "error" (any
// case; slog's offsets such as "info+2" also work).
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// Options says how to build the daemon's logger. The zero value logs text
// at info level to standard error.
type Options struct {
	// Format is FormatText (also for "") or FormatJSON.
	Format Format
	// Level is the lowest level written; nil means slog.LevelInfo. Pass a
	// *slog.LevelVar to change it while running.
	Level slog.Leveler
	// Path is the log file; "" writes to Stderr instead.
	Path string
	// File tunes rotation when Path is set.
	File FileOptions
	// Stderr is where lines go without a Path; nil means os.Stderr.
	Stderr io.Writer
}

// Logger is the daemon's logger and, when it writes to a file, that file.
// Use its embedded *slog.Logger everywhere (pass l.Logger down), and
// Events(l.Logger) for the event lines.
type Logger struct {
	*slog.Logger
	file *File
}

// New builds the logger described by opts. It fails only when the log
// file cannot be opened or opts are invalid.
func New(opts Options) (*Logger, error) {
	format, err := ParseFormat(string(opts.Format))
	if err != nil {
		return nil, err
	}
	l := &Logger{}
	var w io.Writer = opts.Stderr
	if w == nil {
		w = os.Stderr
	}
	if opts.Path != "" {
		fo := opts.File
		// reporter logs rotation trouble into the log itself. It runs
		// inside a Write, while the logger's handler holds its lock, so
		// it needs a handler of its own on the same file.
		var reporter *slog.Logger
		if fo.OnError == nil {
			fo.OnError = func(err error) {
				if reporter == nil { // still opening
					fmt.Fprintf(os.Stderr, "macake: %v\n", err)
					return
				}
				reporter.Error("log file trouble; still writing to the current file", KeyEvent, string(EventLogFile), KeyError, err)
			}
		}
		f, err := OpenFile(opts.Path, fo)
		if err != nil {
			return nil, err
		}
		reporter = slog.New(NewHandler(f, format, opts.Level))
		l.file, w = f, f
	}
	l.Logger = slog.New(NewHandler(w, format, opts.Level))
	return l, nil
}

// NewHandler returns the slog handler New uses, writing to w. Useful for
// tests and for tools that log to something other than a File.
func NewHandler(w io.Writer, format Format, level slog.Leveler) slog.Handler {
	ho := &slog.HandlerOptions{Level: level}
	if format == FormatJSON {
		return slog.NewJSONHandler(w, ho)
	}
	return slog.NewTextHandler(w, ho)
}

// File returns the log file, or nil when logging to standard error.
func (l *Logger) File() *File { return l.file }

// Reopen reopens the log file after an external rotator moved it (call it
// on SIGHUP); without a file it does nothing.
func (l *Logger) Reopen() error {
	if l.file == nil {
		return nil
	}
	return l.file.Reopen()
}

// Close closes the log file, if any. Log nothing after it.
func (l *Logger) Close() error {
	if l.file == nil {
		return nil
	}
	return l.file.Close()
}
