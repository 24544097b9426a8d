// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"errors"
	"strings"
	"testing"

	"github.com/macake/macake/launchd"
)

func TestParseAnchors(t *testing.T) {
	got, err := ParseAnchors([]byte("  com.apple/200.AirDrop\n  com.apple/250.ApplicationFirewall\n  com.apple/macake\n"), []byte("No ALTQ support in kernel\nALTQ related functions disabled\n"))
	if err != nil || strings.Join(got, ",") != "com.apple/200.AirDrop,com.apple/250.ApplicationFirewall,com.apple/macake" {
		t.Errorf("ParseAnchors = %q, %v", got, err)
	}
	if _, err := ParseAnchors(nil, []byte("Anchor 'nope' not found.\n")); !errors.Is(err, errAnchorMissing) {
		t.Errorf("missing anchor: %v", err)
	}
	if _, err := ParseAnchors(nil, []byte("pfctl: /dev/pf: Permission denied\n")); err == nil {
		t.Error("permission denied: no error")
	}
	if _, err := ParseAnchors([]byte("TRANSLATION RULES:\n"), nil); err == nil {
		t.Error("a line that is not an anchor: no error")
	}
}

// FuzzParseAnchors: any input gives paths without spaces or an error,
// never a panic.
func FuzzParseAnchors(f *testing.F) {
	f.Add([]byte("  com.apple\n  com.apple.nlc\n"), []byte(""))
	f.Add([]byte(""), []byte("Anchor 'com.apple/x' not found.\n"))
	f.Add([]byte("  com.apple/250.ApplicationFirewall\r\n"), []byte("No ALTQ support in kernel\n"))
	f.Add([]byte("   \n  a b\n"), []byte("pfctl: /dev/pf: Permission denied"))
	f.Fuzz(func(t *testing.T, stdout, stderr []byte) {
		paths, err := ParseAnchors(stdout, stderr)
		if err != nil {
			return
		}
		for _, p := range paths {
			if p == "" || strings.ContainsAny(p, " \t\"") {
				t.Errorf("bad path %q", p)
			}
		}
	})
}

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
