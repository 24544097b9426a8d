// SPDX-License-Identifier: Apache-2.0

// Package bugreport assembles `macake bugreport`: one text file with what
// a maintainer needs to understand a problem (the version, the OS, what
// doctor, status and a dry run say, the policy files, the daemon's last
// log lines), with MAC addresses and Wi-Fi names masked (Redactor)
// unless the user asks otherwise. It gathers files and logs itself; the
// outputs of macake's own commands are handed to it.
package bugreport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/systemd"
)

// Section is one part of the report: a title and its text, or why it is
// missing.
type Section struct {
	Title string
	Body  string
	// Note says what the section is or why it is short ("exit status 1",
	// "not found").
	Note string
}

// Report is the whole report, in order.
type Report struct {
	Made     time.Time
	Sections []Section
	// Redacted says whether MACs and SSIDs were masked.
	Redacted bool
}

// Add appends a section.
func (r *Report) Add(s Section) { r.Sections = append(r.Sections, s) }

// Write writes the report as text: a header, then each section under a
// line of its title. With red, every section's text goes through it.
func (r *Report) Write(w io.Writer, red *Redactor) error {
	if red != nil {
		// Learn every SSID first (after its key anywhere in the report),
		// so that a section before the one that names it is masked too.
		for _, s := range r.Sections {
			red.Redact(s.Title + "\n" + s.Body)
		}
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "macake bug report, made %s\n", r.Made.UTC().Format(time.RFC3339))
	if red != nil {
		fmt.Fprintln(bw, "MAC addresses and Wi-Fi names (SSIDs) are masked: [MAC-n] and [SSID-n] stand for one value each, the same everywhere below.")
	} else {
		fmt.Fprintln(bw, "Not redacted (--no-redact): MAC addresses and Wi-Fi names are as they are. Check before sharing.")
	}
	for _, s := range r.Sections {
		title := s.Title
		if s.Note != "" {
			title += " (" + s.Note + ")"
		}
		body := strings.TrimRight(s.Body, "\n")
		if red != nil {
			title, body = red.Redact(title), red.Redact(body)
		}
		fmt.Fprintf(bw, "\n===== %s =====\n", title)
		if body != "" {
			fmt.Fprintln(bw, body)
		}
	}
	return bw.Flush()
}

// PolicyFiles returns one section per policy file of dir (as config.Load
// would read them) and one for the daemon settings file next to it,
// verbatim.
func PolicyFiles(dir string) []Section {
	var out []Section
	entries, err := os.ReadDir(dir)
	if err != nil {
		return []Section{{Title: "policy files in " + dir, Note: "cannot be read", Body: err.Error()}}
	}
	files := []string{}
	for _, e := range entries {
		if config.IsPolicyFile(e.Name()) && !e.IsDir() {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		out = append(out, Section{Title: "policy files in " + dir, Note: "none"})
	}
	for _, f := range append(files, settings.DaemonFileFor(dir)) {
		b, err := os.ReadFile(f)
		switch {
		case errors.Is(err, fs.ErrNotExist) && f == settings.DaemonFileFor(dir):
			out = append(out, Section{Title: f, Note: "absent: the defaults apply"})
		case err != nil:
			out = append(out, Section{Title: f, Note: "cannot be read", Body: err.Error()})
		default:
			out = append(out, Section{Title: f, Body: string(b)})
		}
	}
	return out
}

// LogTail returns the last n lines of the log file path, reading at most
// the file's last 4 MiB (a rotated log is capped at 10 MiB).
func LogTail(path string, n int) Section {
	s := Section{Title: "last log lines of " + path}
	f, err := os.Open(path)
	if err != nil {
		s.Note = "cannot be read"
		if errors.Is(err, fs.ErrNotExist) {
			s.Note = "absent"
		}
		s.Body = err.Error()
		return s
	}
	defer f.Close()
	const window = 4 << 20
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		f.Seek(fi.Size()-window, io.SeekStart)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		s.Note, s.Body = "cannot be read", err.Error()
		return s
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s.Note = fmt.Sprintf("%d lines", len(lines))
	if len(lines) == 1 && lines[0] == "" {
		s.Note = "empty"
	}
	s.Body = strings.Join(lines, "\n")
	return s
}

// LogSources say where the daemon's log may be, in the order a report
// looks: macake.toml's log_file, the file a running watch says it writes
// to (its --log-file: status's daemon.log_file), else where the service
// manager of GOOS puts it.
type LogSources struct {
	SettingsFile, WatchFile string
	GOOS                    string
}

// Logs returns the last n lines of the daemon's log, as src says where
// it is: a file, or systemd's journal of the watch unit.
func Logs(ctx context.Context, run execrun.Runner, src LogSources, n int) []Section {
	switch {
	case src.SettingsFile != "":
		return []Section{LogTail(src.SettingsFile, n)}
	case src.WatchFile != "":
		return []Section{LogTail(src.WatchFile, n)}
	case src.GOOS == "darwin":
		return []Section{LogTail(launchd.DaemonLogPath, n), LogTail(launchd.DaemonStderrPath, n)}
	}
	return []Section{Journal(ctx, run, systemd.UnitName, n)}
}

// Journal returns the last n lines systemd's journal keeps for unit
// (journalctl), for a daemon that logs to its standard error there.
func Journal(ctx context.Context, run execrun.Runner, unit string, n int) Section {
	s := Section{Title: "last journal lines of " + unit}
	res, err := run.Run(ctx, execrun.Command{Argv: []string{"journalctl", "-u", unit, "-n", fmt.Sprint(n), "--no-pager", "-o", "short-iso"}})
	switch {
	case err != nil:
		s.Note, s.Body = "journalctl did not run", err.Error()
	case res.ExitCode != 0:
		s.Note, s.Body = fmt.Sprintf("journalctl exit status %d", res.ExitCode), string(bytes.TrimSpace(res.Stderr))
	default:
		s.Body = string(res.Stdout)
	}
	return s
}

// Save writes a report to a new file at path, readable by its owner
// alone, and returns the path written. The file is created exclusively: a
// file or a symbolic link already at path is never written through (in a
// shared directory a user's link under the report's predictable name had
// root overwrite the file it pointed at, and the report was world
// readable; issue 27). With numbered, a name already taken gets "-2",
// "-3", … before its extension instead, so that a planted file cannot
// keep the report from being written; without, it is an error.
func Save(path string, data []byte, numbered bool) (string, error) {
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(path, ext)
	for n := 1; ; n++ {
		name := path
		if n > 1 {
			name = fmt.Sprintf("%s-%d%s", stem, n, ext)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			if numbered && n < 100 {
				continue
			}
			return "", fmt.Errorf("%s exists; name another file with --out, or remove it", name)
		}
		if err != nil {
			return "", err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return "", fmt.Errorf("writing %s: %w", name, err)
		}
		if err := f.Close(); err != nil {
			return "", fmt.Errorf("writing %s: %w", name, err)
		}
		return name, nil
	}
}
