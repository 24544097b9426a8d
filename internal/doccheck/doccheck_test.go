// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the documentation's marked blocks from their golden files")

// root is the repository, seen from this package's directory.
const root = "../.."

// marker is one parsed `<!-- golden: … -->` comment.
type marker struct {
	files     []string
	replaces  [][2]string
	lines     string // the SPEC of a lines option, "" for all
	prompt    string
	hasLines  bool
	hasPrompt bool
}

// parseMarker reads the text between "<!-- golden:" and "-->".
func parseMarker(text string) (marker, error) {
	var m marker
	parts := strings.Split(text, ";")
	for _, f := range strings.Split(parts[0], ",") {
		if f = strings.TrimSpace(f); f != "" {
			m.files = append(m.files, f)
		}
	}
	if len(m.files) == 0 {
		return m, fmt.Errorf("names no file")
	}
	for _, opt := range parts[1:] {
		opt = strings.TrimSpace(opt)
		word, rest, _ := strings.Cut(opt, " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "replace":
			old, new, ok := strings.Cut(rest, " => ")
			if !ok || strings.TrimSpace(old) == "" {
				return m, fmt.Errorf("option %q: want replace OLD => NEW", opt)
			}
			m.replaces = append(m.replaces, [2]string{strings.TrimSpace(old), strings.TrimSpace(new)})
		case "lines":
			if rest == "" {
				return m, fmt.Errorf("option %q: want lines SPEC", opt)
			}
			m.lines, m.hasLines = rest, true
		case "prompt":
			m.prompt, m.hasPrompt = rest, true
		default:
			return m, fmt.Errorf("unknown option %q (replace, lines or prompt)", opt)
		}
	}
	return m, nil
}

// selectLines keeps the lines of text that spec names (1-based), with a
// line "…" for each gap between them, before the first or after the last.
func selectLines(text, spec string) (string, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var out []string
	next := 1 // the line after the last one kept
	for _, r := range strings.Split(spec, ",") {
		r = strings.TrimSpace(r)
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return "", fmt.Errorf("lines %q: %q is not N, N-M or N-", spec, r)
		}
		b := a
		switch {
		case isRange && strings.TrimSpace(hi) == "":
			b = len(lines)
		case isRange:
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				return "", fmt.Errorf("lines %q: %q is not N, N-M or N-", spec, r)
			}
		}
		if a < next || b < a || b > len(lines) {
			return "", fmt.Errorf("lines %q: %q is out of order or beyond the %d lines", spec, r, len(lines))
		}
		if a > next {
			out = append(out, "…")
		}
		out = append(out, lines[a-1:b]...)
		next = b + 1
	}
	if next <= len(lines) {
		out = append(out, "…")
	}
	return strings.Join(out, "\n") + "\n", nil
}

// want is what the block after m must hold.
func (m marker) want() (string, error) {
	var b strings.Builder
	for _, f := range m.files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		b.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	text := b.String()
	for _, r := range m.replaces {
		if !strings.Contains(text, r[0]) {
			return "", fmt.Errorf("replace %q: not in %s", r[0], strings.Join(m.files, ", "))
		}
		text = strings.ReplaceAll(text, r[0], r[1])
	}
	if m.hasLines {
		var err error
		if text, err = selectLines(text, m.lines); err != nil {
			return "", err
		}
	}
	if m.hasPrompt {
		text = m.prompt + "\n" + text
	}
	return text, nil
}

// block is one marked fenced block of a document.
type block struct {
	line       int // of the marker, 1-based
	marker     marker
	indent     string
	start, end int // the block's content is lines[start:end]
}

const markerOpen = "<!-- golden:"

// scan finds the marked blocks of a document, and reports a marker not
// followed by a block and a console block without a marker.
func scan(lines []string) ([]block, []string) {
	var blocks []block
	var problems []string
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
		if strings.HasPrefix(trimmed, "```console") {
			problems = append(problems, fmt.Sprintf("%d: a console block without a %s … --> marker before it", i+1, markerOpen))
		}
		if !strings.HasPrefix(trimmed, markerOpen) {
			if strings.HasPrefix(trimmed, "```") {
				i = closing(lines, i, indent) // skip the block: a marker inside one is an example
			}
			continue
		}
		at := i
		text := strings.TrimPrefix(trimmed, markerOpen)
		for !strings.Contains(text, "-->") && i+1 < len(lines) {
			i++
			text += " " + strings.TrimSpace(lines[i])
		}
		text, _, _ = strings.Cut(text, "-->")
		m, err := parseMarker(text)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%d: the marker %v", at+1, err))
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "```") {
			problems = append(problems, fmt.Sprintf("%d: the marker is not followed by a fenced block", at+1))
			continue
		}
		i++
		fenceIndent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
		end := closing(lines, i, fenceIndent)
		if end >= len(lines) {
			problems = append(problems, fmt.Sprintf("%d: the block is never closed", i+1))
			return blocks, problems
		}
		blocks = append(blocks, block{line: at + 1, marker: m, indent: fenceIndent, start: i + 1, end: end})
		i = end
	}
	return blocks, problems
}

// closing is the index of the fence that closes the block opened at open.
func closing(lines []string, open int, indent string) int {
	for j := open + 1; j < len(lines); j++ {
		if strings.TrimSpace(lines[j]) == "```" && strings.HasPrefix(lines[j], indent) {
			return j
		}
	}
	return len(lines)
}

// content is the block's text with the fence's indentation taken off.
func (b block) content(lines []string) string {
	var out strings.Builder
	for _, l := range lines[b.start:b.end] {
		out.WriteString(strings.TrimPrefix(l, b.indent) + "\n")
	}
	return out.String()
}

// documents are the repository's Markdown files, as paths from root.
func documents(t *testing.T) []string {
	t.Helper()
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			docs = append(docs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestTranscriptsEqualTheirGoldenFiles: every marked block in the docs
// holds what its golden files hold; -update rewrites the blocks.
func TestTranscriptsEqualTheirGoldenFiles(t *testing.T) {
	total := 0
	for _, doc := range documents(t) {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		blocks, problems := scan(lines)
		for _, p := range problems {
			t.Errorf("%s:%s", doc, p)
		}
		total += len(blocks)
		// From the last block back, so that a rewrite keeps the earlier
		// blocks' line numbers.
		changed := false
		for i := len(blocks) - 1; i >= 0; i-- {
			b := blocks[i]
			want, err := b.marker.want()
			if err != nil {
				t.Errorf("%s:%d: %v", doc, b.line, err)
				continue
			}
			got := b.content(lines)
			if got == want {
				continue
			}
			if !*update {
				t.Errorf("%s:%d: the block differs from %s (go test ./internal/doccheck -update rewrites it)\n--- doc\n%s--- golden\n%s",
					doc, b.line, strings.Join(b.marker.files, ", "), got, want)
				continue
			}
			var repl []string
			for _, l := range strings.Split(strings.TrimSuffix(want, "\n"), "\n") {
				if l != "" {
					l = b.indent + l
				}
				repl = append(repl, l)
			}
			lines = append(lines[:b.start], append(repl, lines[b.end:]...)...)
			changed = true
		}
		if changed {
			if err := os.WriteFile(filepath.Join(root, doc), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if total == 0 {
		t.Fatal("no marked block in any document: the test would check nothing")
	}
}

func TestParseMarker(t *testing.T) {
	for _, tc := range []struct {
		text string
		want marker
		err  bool
	}{
		{" a.txt ", marker{files: []string{"a.txt"}}, false},
		{" a.txt, b.txt; replace /ROOT => /etc; lines 1-3, 9-; prompt $ macake x ",
			marker{files: []string{"a.txt", "b.txt"}, replaces: [][2]string{{"/ROOT", "/etc"}}, lines: "1-3, 9-", hasLines: true, prompt: "$ macake x", hasPrompt: true}, false},
		{" ; prompt x", marker{}, true},
		{" a.txt; replace x", marker{}, true},
		{" a.txt; colour red", marker{}, true},
	} {
		got, err := parseMarker(tc.text)
		if (err != nil) != tc.err {
			t.Errorf("%q: error %v, want error %v", tc.text, err, tc.err)
			continue
		}
		if !tc.err && fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %+v, want %+v", tc.text, got, tc.want)
		}
	}
}

func TestSelectLines(t *testing.T) {
	text := "1\n2\n3\n4\n5\n"
	for _, tc := range []struct {
		spec, want string
		err        bool
	}{
		{"1-5", "1\n2\n3\n4\n5\n", false},
		{"1, 4-", "1\n…\n4\n5\n", false},
		{"2-3", "…\n2\n3\n…\n", false},
		{"3, 1", "", true},
		{"1-9", "", true},
		{"x", "", true},
	} {
		got, err := selectLines(text, tc.spec)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("lines %s: %q, %v; want %q (error %v)", tc.spec, got, err, tc.want, tc.err)
		}
	}
}

func TestScanFindsBlocksAndProblems(t *testing.T) {
	doc := strings.Split(strings.Join([]string{
		"<!-- golden: a.txt -->", // 1
		"```console",
		"$ macake x",
		"```",
		"```console", // 5: no marker
		"x",
		"```",
		"- item",
		"  <!-- golden: b.txt;", // 9: indented, two lines
		"       prompt $ y -->",
		"  ```",
		"  out",
		"  ```",
		"<!-- golden: c.txt -->", // 14: no block
		"text",
		"```md", // a marker inside a block is an example
		"<!-- golden: d.txt -->",
		"```",
	}, "\n"), "\n")
	blocks, problems := scan(doc)
	if len(blocks) != 2 || blocks[0].line != 1 || blocks[1].line != 9 || blocks[1].indent != "  " || blocks[1].content(doc) != "out\n" || !blocks[1].marker.hasPrompt {
		t.Errorf("blocks %+v", blocks)
	}
	if len(problems) != 2 || !strings.HasPrefix(problems[0], "5:") || !strings.HasPrefix(problems[1], "14:") {
		t.Errorf("problems %q", problems)
	}
}
