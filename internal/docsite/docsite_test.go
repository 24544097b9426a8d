// SPDX-License-Identifier: Apache-2.0

package docsite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestPage(t *testing.T) {
	if got := Page("CONFIG.md", ""); got != "https://github.com/macake/macake/blob/main/docs/CONFIG.md" {
		t.Errorf("Page = %q", got)
	}
	if got := Page("LINUX.md", "keep-it-running-systemd"); got != "https://github.com/macake/macake/blob/main/docs/LINUX.md#keep-it-running-systemd" {
		t.Errorf("Page = %q", got)
	}
}

// TestEveryPageTheBinaryNamesExists: each Page(...) call in the product
// names a page of docs/ that is there, and a heading that page has.
func TestEveryPageTheBinaryNamesExists(t *testing.T) {
	call := regexp.MustCompile(`docsite\.Page\("([A-Z]+\.md)", "([^"]*)"\)`)
	found := 0
	filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			found++
			doc, err := os.ReadFile(filepath.Join("../../docs", m[1]))
			if err != nil {
				t.Errorf("%s names docs/%s: %v", path, m[1], err)
				continue
			}
			if m[2] != "" && !hasAnchor(string(doc), m[2]) {
				t.Errorf("%s names docs/%s#%s: no such heading", path, m[1], m[2])
			}
		}
		return nil
	})
	if found == 0 {
		t.Fatal("no docsite.Page call found: the pattern is wrong")
	}
}

// hasAnchor reports whether doc has a heading GitHub gives anchor.
func hasAnchor(doc, anchor string) bool {
	for _, l := range strings.Split(doc, "\n") {
		h, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " ")
		if !ok || !strings.HasPrefix(l, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
}
