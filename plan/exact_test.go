// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
)

func sample() Plan {
	return Plan{Ops: []Op{
		{Link: "home", Interface: "en0", Kind: "pipe", ID: "48002", Label: `pipe 48002 "home/download"`, Action: Update, Reason: "bandwidth differs", Unchanged: 5,
			Fields:   []Field{{Name: "bandwidth", Before: "80 Mbit/s", After: "100 Mbit/s", Key: "bandwidth_bits_per_second", BeforeValue: int64(80e6), AfterValue: int64(100e6), Note: "the wire rate 105 Mbit/s less framing"}},
			Commands: []execrun.Command{{Argv: []string{"/usr/sbin/dnctl", "pipe", "48002", "config", "bw", "100000Kbit/s", "queue", "256Kbytes"}}}},
		{Kind: "rules", ID: "com.apple/macake", Label: `anchor "com.apple/macake"`, Action: Create, Role: RoleRules,
			Fields:   []Field{{Name: "rules on en0", Before: "", After: "2 rules", Key: "rules_on_en0", Lines: []string{"+ a", "+ b"}}},
			Commands: []execrun.Command{{Argv: []string{"/sbin/pfctl", "-a", "com.apple/macake", "-f", "-"}, Stdin: "a\nb\n"}}},
	}, Warnings: []Warning{{Link: "home", Message: "clamped", Unshaped: []string{"upload"}}}}
}

// TestExactRoundTrip: a decoded plan renders as the plan it was made
// from, text and commands included, and encodes to the same bytes.
func TestExactRoundTrip(t *testing.T) {
	p := sample()
	b, err := EncodeExact(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeExact(b)
	if err != nil {
		t.Fatal(err)
	}
	var want, got strings.Builder
	opts := TextOptions{ShowCommands: true, Symbols: true}
	WriteText(&want, p, opts)
	WriteText(&got, back, opts)
	if want.String() != got.String() {
		t.Errorf("rendered after the round trip:\n%s\nbefore:\n%s", got.String(), want.String())
	}
	again, _ := EncodeExact(back)
	if !bytes.Equal(again, b) {
		t.Errorf("encoding the decoded plan differs:\n%s\n%s", again, b)
	}
	if back.Ops[1].Role != RoleRules {
		t.Error("the op's role is lost")
	}
}

func TestDecodeExactRefusesUnknownActions(t *testing.T) {
	if _, err := DecodeExact([]byte(`{"changes":[{"kind":"pipe","label":"x","action":"explode"}]}`)); err == nil || !strings.Contains(err.Error(), "explode") {
		t.Errorf("unknown action: %v", err)
	}
}

func TestSummaryAndOnlyLink(t *testing.T) {
	p := sample()
	if got := p.Ops[0].Summary(); got != `~ pipe 48002 "home/download": bandwidth 80 Mbit/s -> 100 Mbit/s` {
		t.Errorf("summary %q", got)
	}
	only := p.OnlyLink("home", nil)
	if len(only.Ops) != 1 || len(only.Warnings) != 1 {
		t.Errorf("OnlyLink(home): %+v", only)
	}
	if len(p.OnlyLink("other", func(op Op) bool { return op.Kind == "rules" }).Ops) != 1 {
		t.Error("a shared op keep asks for must stay")
	}
}

func FuzzDecodeExact(f *testing.F) {
	b, _ := EncodeExact(sample())
	f.Add(b)
	f.Add([]byte(`{"changes":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodeExact(data)
		if err != nil {
			return
		}
		// Whatever decodes encodes, and decodes the same again.
		b, err := EncodeExact(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeExact(b); err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
	})
}

// TestExactOpHasEveryMember: a member added to Op must be added to its
// exact encoding too, or a saved plan would lose it.
func TestExactOpHasEveryMember(t *testing.T) {
	names := func(v any) []string {
		var out []string
		for f := range reflect.TypeOf(v).Fields() {
			out = append(out, f.Name)
		}
		return out
	}
	if op, x := names(Op{}), names(exactOp{}); !slices.Equal(op, x) {
		t.Errorf("Op has %v, its exact encoding %v", op, x)
	}
}
