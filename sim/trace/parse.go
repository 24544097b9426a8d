// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/shape"
)

// maxTimestampMS bounds a mahimahi timestamp (about 28 hours; the longest
// published trace lasts 18 minutes), so a corrupt file cannot make replay or
// statistics allocate without limit.
const maxTimestampMS = 100_000_000

// maxLineBytes bounds one line of a trace file; real ones are < 200 bytes.
const maxLineBytes = 1 << 16

// LoadSpec loads the traces a command-line spec names: "FILE" for every
// trace in the file, or "FILE:COLUMN" for one column of a CSV with a header.
func LoadSpec(spec string) ([]*Trace, error) {
	path, column := spec, ""
	if _, err := os.Stat(spec); err != nil {
		if i := strings.LastIndexByte(spec, ':'); i > 0 {
			path, column = spec[:i], spec[i+1:]
		}
	}
	traces, err := Load(path)
	if err != nil {
		return nil, err
	}
	if column == "" {
		return traces, nil
	}
	var names []string
	for _, t := range traces {
		if strings.HasSuffix(t.Name, ":"+column) {
			return []*Trace{t}, nil
		}
		names = append(names, t.Name[strings.LastIndexByte(t.Name, ':')+1:])
	}
	return nil, fmt.Errorf("%s: no rate column %q; the file has %s", path, column, strings.Join(names, ", "))
}

// Load reads every trace in the file at path: one for a mahimahi file or a
// headerless "value,unit" CSV, one per *_mbps column for a CSV with a header.
func Load(path string) ([]*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	defer f.Close()
	// Errors name the file as given, so that the user can open it; the
	// traces take the short "set/file" name tables show.
	traces, err := Parse(path, f)
	if err != nil {
		return nil, err
	}
	name, class := displayName(path), classOf(path)
	for _, t := range traces {
		if t.Name == path { // a whole-file trace: its direction comes from its name, not from a far-up directory
			t.Direction = directionOf(name)
		}
		t.Name = name + strings.TrimPrefix(t.Name, path)
		t.Class = class
	}
	return traces, nil
}

// Parse reads the traces in r, deciding the format from the first non-empty
// line: an integer means mahimahi, anything else CSV. name prefixes error
// messages and names the traces.
func Parse(name string, r io.Reader) ([]*Trace, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(256)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	first := string(head)
	for _, line := range strings.Split(first, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if isDigits(line) {
			t, err := ParseMahimahi(name, br)
			if err != nil {
				return nil, err
			}
			return []*Trace{t}, nil
		}
		break
	}
	return ParseCSV(name, br)
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// ParseMahimahi reads a mahimahi trace: one millisecond timestamp per line,
// non-decreasing; each line is one 1500-byte delivery opportunity. The
// direction comes from the name's suffix (.up is upload, anything else
// download).
func ParseMahimahi(name string, r io.Reader) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	t := &Trace{Name: name, Direction: directionOf(name)}
	var prev int64
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not a millisecond timestamp (mahimahi traces hold one non-negative integer per line)", name, line, text)
		}
		if v > maxTimestampMS {
			return nil, fmt.Errorf("%s:%d: timestamp %d ms is more than a day into the trace; real traces last minutes", name, line, v)
		}
		if v < prev {
			return nil, fmt.Errorf("%s:%d: timestamp %d ms is before the previous line's %d ms; mahimahi timestamps never decrease", name, line, v, prev)
		}
		prev = v
		t.Opportunities = append(t.Opportunities, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// ParseCSV reads per-second rate series. Two layouts are understood:
// headerless "value,unit" rows (NYU-METS: Mbits/sec, Kbits/sec, bits/sec,
// Gbits/sec; row i is second i), and a header row naming *_mbps columns
// (Mbit/s), timed by a seq_num column (seconds), a timestamp_start column
// ("2006-01-02 15:04:05") or else the row number. Empty cells are skipped,
// and a time step other than exactly one second starts a new segment.
func ParseCSV(name string, r io.Reader) ([]*Trace, error) {
	data, err := io.ReadAll(io.LimitReader(r, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = false
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: empty file; want a mahimahi trace or a CSV rate series", name)
	}
	if _, err := strconv.ParseFloat(strings.TrimSpace(rows[0][0]), 64); err == nil {
		t, err := parseValueUnit(name, rows)
		if err != nil {
			return nil, err
		}
		return []*Trace{t}, nil
	}
	return parseHeaderCSV(name, rows)
}

func parseValueUnit(name string, rows [][]string) (*Trace, error) {
	t := &Trace{Name: name, Direction: directionOf(name), Step: time.Second}
	for i, row := range rows {
		line := i + 1
		if len(row) != 2 {
			return nil, fmt.Errorf("%s:%d: want two fields \"value,unit\", got %d", name, line, len(row))
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(row[0]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not a non-negative number", name, line, row[0])
		}
		unit := strings.TrimSpace(row[1])
		switch {
		case strings.HasPrefix(unit, "Gbits"):
			v *= 1e9
		case strings.HasPrefix(unit, "Mbits"):
			v *= 1e6
		case strings.HasPrefix(unit, "Kbits"):
			v *= 1e3
		case strings.HasPrefix(unit, "bits"):
		default:
			return nil, fmt.Errorf("%s:%d: unknown unit %q; want Gbits/sec, Mbits/sec, Kbits/sec or bits/sec", name, line, unit)
		}
		r, err := bitsPerSecond(v)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		t.Rates = append(t.Rates, r)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

func bitsPerSecond(v float64) (int64, error) {
	if v > 1e12 {
		return 0, fmt.Errorf("rate %.0f bit/s is beyond any real link", v)
	}
	return int64(math.Round(v)), nil
}

func parseHeaderCSV(name string, rows [][]string) ([]*Trace, error) {
	header := rows[0]
	timeCol, timeKind := -1, ""
	var cols []int
	for i, h := range header {
		h = strings.TrimSpace(h)
		switch {
		case h == "seq_num":
			timeCol, timeKind = i, "seq"
		case h == "timestamp_start" && timeKind == "":
			timeCol, timeKind = i, "timestamp"
		case strings.HasSuffix(h, "_mbps"):
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%s:1: no rate column; want a header with *_mbps columns (Mbit/s) or headerless \"value,unit\" rows", name)
	}
	times := make([]int64, len(rows)-1)
	for i, row := range rows[1:] {
		line := i + 2
		switch timeKind {
		case "seq":
			if timeCol >= len(row) {
				return nil, fmt.Errorf("%s:%d: missing seq_num", name, line)
			}
			v, err := strconv.ParseInt(strings.TrimSpace(row[timeCol]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: seq_num %q is not an integer", name, line, row[timeCol])
			}
			times[i] = v
		case "timestamp":
			if timeCol >= len(row) {
				return nil, fmt.Errorf("%s:%d: missing timestamp_start", name, line)
			}
			ts, err := time.Parse("2006-01-02 15:04:05", strings.TrimSpace(row[timeCol]))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: timestamp_start %q: want YYYY-MM-DD HH:MM:SS", name, line, row[timeCol])
			}
			times[i] = ts.Unix()
		default:
			times[i] = int64(i)
		}
	}
	var out []*Trace
	for _, c := range cols {
		col := strings.TrimSpace(header[c])
		tname := name + ":" + col
		t := &Trace{Name: tname, Direction: directionOf(col), Step: time.Second}
		var prev int64
		have := false
		for i, row := range rows[1:] {
			line := i + 2
			if c >= len(row) || strings.TrimSpace(row[c]) == "" {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(row[c]), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return nil, fmt.Errorf("%s:%d: %s %q is not a non-negative number", name, line, col, row[c])
			}
			r, err := bitsPerSecond(v * 1e6)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, line, err)
			}
			if have && times[i] != prev+1 {
				t.SegmentStarts = append(t.SegmentStarts, len(t.Rates))
			}
			prev, have = times[i], true
			t.Rates = append(t.Rates, r)
		}
		if err := t.Validate(); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// directionOf guesses the direction from a file or column name.
func directionOf(name string) shape.Direction {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, ".up") || strings.Contains(n, "upload") || strings.Contains(n, "uplink") {
		return shape.Upload
	}
	return shape.Download
}

// displayName is the last directory and the file name, "set/file".
func displayName(path string) string {
	dir := filepath.Base(filepath.Dir(path))
	if dir == "." || dir == "/" {
		return filepath.Base(path)
	}
	return dir + "/" + filepath.Base(path)
}

// Sibling names the other direction's mahimahi file (X.down ↔ X.up) when
// it exists, else "".
func Sibling(path string) string {
	other := SiblingPath(path)
	if other == "" {
		return ""
	}
	if _, err := os.Stat(other); err != nil {
		return ""
	}
	return other
}

// SiblingPath is the name the other direction's mahimahi file would have
// (X.down ↔ X.up), or "" for a file that is neither.
func SiblingPath(path string) string {
	switch {
	case strings.HasSuffix(path, ".down"):
		return strings.TrimSuffix(path, ".down") + ".up"
	case strings.HasSuffix(path, ".up"):
		return strings.TrimSuffix(path, ".up") + ".down"
	}
	return ""
}

// classOf names the kind of link a trace directory holds.
func classOf(path string) string {
	switch filepath.Base(filepath.Dir(path)) {
	case "starlink-road":
		return "starlink"
	case "mahimahi":
		return "cellular"
	case "nyu-mets":
		return "lte-tcp"
	case "5gophers":
		return "5g"
	case "norway-hsdpa":
		return "3g"
	case "fcc-broadband":
		return "broadband"
	}
	return "trace"
}

// SharedDir finds the shared trace directory (the project's ../shared/traces,
// which the repository never contains): $MACAKE_TRACES if set, else the first
// shared/traces directory found walking up from start. It returns "" when
// there is none, as in CI.
func SharedDir(start string) string {
	if d := os.Getenv("MACAKE_TRACES"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
		return ""
	}
	dir, err := filepath.Abs(start)
	if err != nil {
		return ""
	}
	for {
		cand := filepath.Join(dir, "shared", "traces")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
