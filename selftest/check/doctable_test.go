// SPDX-License-Identifier: Apache-2.0

package check

import (
	"strings"
	"testing"
)

func TestDocMismatches(t *testing.T) {
	checks := []Check{{ID: "dnctl.a", Ref: "§1.7"}, {ID: "pfctl.b", Ref: "§3.2"}}
	for _, tt := range []struct {
		name, doc, prefix string
		want              []string
	}{
		{
			name: "every check listed with its reference",
			doc:  "| check | fact | section |\n|---|---|---|\n| `dnctl.a` | x | §1.7 |\n| `pfctl.b` | y | §3.2 |\n",
		},
		{
			name: "a row missing, one with another reference, one for no check",
			doc:  "| `dnctl.a` | x | §1.6 |\n| `pfctl.gone` | y | §3.2 |\n| `not a check` | z | w |\n",
			want: []string{
				`D gives dnctl.a the reference "§1.6", the check "§1.7"`,
				"D lacks a row for pfctl.b",
				"D lists pfctl.gone, which is no check",
			},
		},
		{
			name:   "rows outside the prefix are other tables",
			doc:    "| `tc.x` | x | y |\n| `dnctl.a` | x | §1.7 |\n| `pfctl.b` | y | §3.2 |\n",
			prefix: "",
			want:   []string{"D lists tc.x, which is no check"},
		},
		{
			name:   "with a prefix, only its rows count",
			doc:    "| `other.x` | x | y |\n",
			prefix: "tc.",
			want:   []string{"D lacks a row for dnctl.a", "D lacks a row for pfctl.b"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := DocMismatches(tt.doc, "D", tt.prefix, checks)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
