// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"strings"
	"testing"
)

func TestSplitExecStart(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{`/usr/local/bin/macake --config-dir /etc/macake/links.d watch`, []string{"/usr/local/bin/macake", "--config-dir", "/etc/macake/links.d", "watch"}, false},
		{`"/opt/my tools/macake" --state-dir "/var/lib/a 100%%" watch`, []string{"/opt/my tools/macake", "--state-dir", "/var/lib/a 100%", "watch"}, false},
		{`/x/$$HOME`, []string{"/x/$HOME"}, false},
		{`"unterminated`, nil, true},
		{`"a"b`, nil, true},
	}
	for _, tt := range tests {
		got, err := SplitExecStart(tt.in)
		if (err != nil) != tt.err || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("SplitExecStart(%q) = %q, %v; want %q (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// FuzzSplitExecStart: what launchd's unit renderer writes splits back into
// the same words, and no input panics.
func FuzzSplitExecStart(f *testing.F) {
	f.Add("/usr/local/bin/macake", "/etc/macake/links.d", "/var/db/macake")
	f.Add("/opt/my tools/macake", `/etc/"quoted"`, "/var/lib/100%/$x")
	f.Add("/a", "/b;", `/c\d`)
	f.Fuzz(func(t *testing.T, bin, cfg, st string) {
		SplitExecStart(bin + " " + cfg + " " + st) // any text: no panic
		prog := Program{Binary: bin, ConfigDir: cfg, StateDir: st}
		unit, err := SystemdWatchUnit(prog)
		if err != nil {
			return
		}
		got, err := ProgramOfUnit(unit)
		if err != nil {
			t.Fatalf("ProgramOfUnit of a rendered unit: %v\n%s", err, unit)
		}
		if got != prog {
			t.Fatalf("round trip: %+v, want %+v", got, prog)
		}
	})
}
