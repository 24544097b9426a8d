// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"strings"
	"testing"

	"github.com/macake/macake/launchd"
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
		prog := launchd.Program{Binary: bin, ConfigDir: cfg, StateDir: st}
		unit, err := launchd.SystemdWatchUnit(prog)
		if err != nil {
			return
		}
		got, err := programOfUnit(unit)
		if err != nil {
			t.Fatalf("programOfUnit of a rendered unit: %v\n%s", err, unit)
		}
		if got != prog {
			t.Fatalf("round trip: %+v, want %+v", got, prog)
		}
	})
}

func TestParseLockHolder(t *testing.T) {
	tests := []struct {
		in     string
		pid    int
		holder string
	}{
		{"4242\n", 4242, ""},
		{"4242 watch\n", 4242, "watch"},
		{"", 0, ""},
		{"-3 watch", 0, ""},
		{"garbage", 0, ""},
	}
	for _, tt := range tests {
		pid, holder := ParseLockHolder(tt.in)
		if pid != tt.pid || holder != tt.holder {
			t.Errorf("ParseLockHolder(%q) = %d, %q; want %d, %q", tt.in, pid, holder, tt.pid, tt.holder)
		}
	}
}

// FuzzParseLockHolder: a pid is positive or 0, and never a panic.
func FuzzParseLockHolder(f *testing.F) {
	f.Add("123 watch\n")
	f.Add("0")
	f.Add("99999999999999999999 x")
	f.Fuzz(func(t *testing.T, s string) {
		if pid, _ := ParseLockHolder(s); pid < 0 {
			t.Errorf("negative pid %d from %q", pid, s)
		}
	})
}
