// SPDX-License-Identifier: Apache-2.0

package clidoc

import (
	"strings"
	"testing"
)

func TestRoffEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`a\b`, `a\eb`},
		{"--dry-run", `\-\-dry\-run`},
		{".not a request", `\&.not a request`},
		{"'not either", `\&'not either`},
		{"✓ ok", `\[u2713] ok`},
		{"trailing  ", "trailing"},
	} {
		if got := roffLine(tc.in); got != tc.want {
			t.Errorf("roffLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFilledWrapsAndGuardsRequests(t *testing.T) {
	text := strings.Repeat("word ", 40) + ".dot 'quote"
	got := filled(text)
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if len(l) > 76 {
			t.Errorf("line of %d bytes: %q", len(l), l)
		}
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			t.Errorf("line starts a request: %q", l)
		}
	}
	if filled("  ") != "" {
		t.Error("blank text must give no line")
	}
}

func TestParagraphKinds(t *testing.T) {
	var b strings.Builder
	writeParagraphs(&b, "Prose that\nis filled.\n\n  indented example\n  kept as typed\n\n0\tok\n1\tfailed", true)
	got := b.String()
	for _, want := range []string{"Prose that is filled.\n", ".nf\nindented example\nkept as typed\n.fi", ".TP\n.B 0\nok\n", ".TP\n.B 1\nfailed\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("rendering lacks %q:\n%s", want, got)
		}
	}
	if strings.HasPrefix(got, ".PP") {
		t.Errorf("the first paragraph after a heading needs no .PP:\n%s", got)
	}
}

func TestZshDescriptionsAreEscaped(t *testing.T) {
	if got := zshDesc("a [b] it's x:y"); got != `a \[b\] it'\''s x\:y` {
		t.Errorf("zshDesc = %q", got)
	}
}

func TestPoliciesNeedASource(t *testing.T) {
	p := Program{Name: "x", Commands: []Command{{Name: "a", Flags: []Flag{{Name: "link", Arg: "NAME", Values: Completion{Kind: Policies}}}}}}
	if _, err := p.Completion("bash"); err == nil {
		t.Error("a Policies completion without Program.PolicyDir must be refused")
	}
	if _, err := p.Completion("tcsh"); err == nil {
		t.Error("an unknown shell must be refused")
	}
}
