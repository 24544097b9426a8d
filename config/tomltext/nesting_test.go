// SPDX-License-Identifier: Apache-2.0

package tomltext

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestNestingDepth checks the scan that guards the TOML library against
// files it would take minutes to parse: it measures what the library
// decodes, through strings, comments, headers and dotted keys.
func TestNestingDepth(t *testing.T) {
	for _, tc := range []struct {
		text  string
		depth int
	}{
		{"", 0},
		{"a = 1\n", 1},
		{"a.b.c = 1\n", 3},
		{"[x.y]\nk = 1\n", 3},
		{"[[x]]\nk = 1\n", 3},
		{"[autorate]\ndownload = { min = \"1mbit\", max = \"2mbit\" }\nreflectors = [\"1.1.1.1\"]\n", 3},
		{"a = {b = [[1]]}\n", 3},
		{"a = [[1], [2, [3]]]\n", 3},
		{"a = {}\nb = []\n", 1},
		{"a = \"[[[{{{\" # [[[[\nb = '{{{{'\n", 1},
		{"a = \"\"\"\n[[[[\n\\\"\"\" [[[\n\"\"\"\nb = 1\n", 1},
		{"a = '''\n[[\n''''\n", 1},
		{"\"a.b\".c = 1\n", 2},
		{"[ 'x.y' . z ]\n", 2},
		{"a = [\n  {b = 1},\n  {c = {d = 1}},\n]\n", 4},
		{"x = " + strings.Repeat("{a=", 10) + "1" + strings.Repeat("}", 10), 11},
	} {
		got := scanShape(tc.text).deepest
		if got != tc.depth {
			t.Errorf("nesting(%q) = %d, want %d", tc.text, got, tc.depth)
		}
		if want := decodedDepth(t, tc.text); want != tc.depth {
			t.Errorf("the table is wrong: the library decodes %q %d deep, not %d", tc.text, want, tc.depth)
		}
	}
}

// decodedDepth is nesting's meaning, measured on what the library decodes.
func decodedDepth(t *testing.T, text string) int {
	t.Helper()
	var v map[string]any
	if _, err := toml.Decode(text, &v); err != nil {
		t.Fatalf("%q is not TOML: %v", text, err)
	}
	return levels(v, 0)
}

func levels(v any, at int) int {
	deepest := at
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			deepest = max(deepest, levels(e, at+1))
		}
	case []map[string]any:
		for _, e := range v {
			deepest = max(deepest, levels(e, at+1))
		}
	case []any:
		for _, e := range v {
			switch e.(type) {
			case map[string]any, []any, []map[string]any:
				deepest = max(deepest, levels(e, at+1))
			}
		}
	}
	return deepest
}

// FuzzNesting checks the depth scan against the library on every text the
// library accepts, so that the scan never refuses a file the bound allows
// (nor lets through one it does not).
func FuzzNesting(f *testing.F) {
	files, _ := filepath.Glob("../../examples/*/*.toml")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		"a = {b = [[1]]}\n", "[[x.y]]\n'a'.\"b\" = [{c = 1}, [2]]\n", "a = \"\"\"\n[[\\\"\"\"\"\nb = '''{{'''''\n",
		"a = [ # [[\n 1, # ]]\n]\n", "a = {b.c = {d = []}, e = {}}\n", "x = " + strings.Repeat("[", 17) + strings.Repeat("]", 17),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		sh := scanShape(text)
		got, over := sh.deepest, sh.overAt
		var v map[string]any
		if len(text) > 4096 {
			return // the library's time grows with the square of the depth
		}
		if _, err := toml.Decode(text, &v); err != nil {
			return
		}
		want := levels(v, 0)
		switch {
		case sh.keys > MaxKeys:
		case want > MaxNesting && over < 0:
			t.Fatalf("%q is %d deep, but the scan let it through (found %d)", text, want, got)
		case want <= MaxNesting && got != want:
			t.Fatalf("%q is %d deep, the scan says %d", text, want, got)
		}
	})
}

// TestExamplesNestShallowly: every example policy passes the bound with
// room to spare.
func TestExamplesNestShallowly(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*/*.toml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if d := scanShape(string(b)).deepest; d > 3 {
			t.Errorf("%s nests %d deep; a policy needs 3 at most", f, d)
		}
	}
}
