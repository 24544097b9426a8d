// SPDX-License-Identifier: Apache-2.0

package systemd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/service"
)

// linuxProgram is what the shipped example units run: `make install`'s
// default prefix and the CLI's default directories on Linux, where state
// lives in /var/lib; examplesProgram the same with macOS's state
// directory, which systemd must be told it may write.
var (
	linuxProgram    = service.Program{Binary: "/usr/local/bin/macake", ConfigDir: "/etc/macake/links.d", StateDir: settings.DefaultStateDirFor("linux")}
	examplesProgram = service.Program{Binary: "/usr/local/bin/macake", ConfigDir: "/etc/macake/links.d", StateDir: settings.DefaultStateDirFor("darwin")}
)

// TestExamplesMatchRenderer keeps examples/systemd identical to what the
// renderers produce; `go test ./service/systemd -update` rewrites them.
func TestExamplesMatchRenderer(t *testing.T) {
	watchUnit, err := WatchUnit(linuxProgram)
	if err != nil {
		t.Fatal(err)
	}
	monitorUnit, err := MonitorUnit(linuxProgram)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{
		"../../examples/systemd/" + UnitName:        watchUnit,
		"../../examples/systemd/" + MonitorUnitName: monitorUnit,
	} {
		golden.Check(t, path, want, "the example must be what the renderer writes")
	}
}

// unitKeys parses a systemd unit into section.key → value, failing on
// anything that is not a comment, a section header or key=value.
func unitKeys(t *testing.T, unit []byte) map[string]string {
	t.Helper()
	keys := map[string]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("unit line %d is not key=value in a section: %q", n, line)
			}
			keys[section+"."+k] = v
		}
	}
	return keys
}

func TestUnits(t *testing.T) {
	unit, err := WatchUnit(linuxProgram)
	if err != nil {
		t.Fatal(err)
	}
	k := unitKeys(t, unit)
	for key, want := range map[string]string{
		"Service.ExecStart":                "/usr/local/bin/macake --config-dir /etc/macake/links.d --state-dir /var/lib/macake watch",
		"Service.Type":                     "simple",
		"Service.Restart":                  "on-failure",
		"Service.RestartSec":               "30",
		"Service.RestartPreventExitStatus": "77 78",
		"Install.WantedBy":                 "multi-user.target",
		"Unit.After":                       "network-online.target",
		// The sandbox (issue 12 item 19): the two capabilities tc and the
		// probes need, a read-only system, the state directory writable.
		"Service.CapabilityBoundingSet": "CAP_NET_ADMIN CAP_NET_RAW",
		"Service.NoNewPrivileges":       "yes",
		"Service.ProtectSystem":         "strict",
		"Service.ReadWritePaths":        "",
		"Service.StateDirectory":        "macake",
	} {
		if k[key] != want {
			t.Errorf("%s = %q, want %q", key, k[key], want)
		}
	}
	// Under /var/lib the state directory is systemd's StateDirectory=,
	// which it creates for root to write and everyone to pass through (to
	// the status socket); elsewhere it must exist, and the install comment
	// says how to make it.
	for _, tc := range []struct {
		dir                    string
		stateDir, mode, rwPath string
		mkdir                  bool
	}{
		{"/var/lib/macake", "macake", "0711", "", false},
		{"/var/lib/macake/", "macake", "0711", "", false},
		{"/var/db/macake", "", "", "/var/db/macake", true},
		{"/srv/100%/state", "", "", "/srv/100%%/state", true},
		{"/srv/my state", "", "", `"/srv/my state"`, true},
		{"/var/lib/macake 100%", `"macake 100%%"`, "0711", "", false},
	} {
		p := examplesProgram
		p.StateDir = tc.dir
		unit, err := WatchUnit(p)
		if err != nil {
			t.Errorf("%s: %v", tc.dir, err)
			continue
		}
		k := unitKeys(t, unit)
		if k["Service.StateDirectory"] != tc.stateDir || k["Service.StateDirectoryMode"] != tc.mode || k["Service.ReadWritePaths"] != tc.rwPath {
			t.Errorf("%s: StateDirectory=%q StateDirectoryMode=%q ReadWritePaths=%q; want %q %q %q", tc.dir,
				k["Service.StateDirectory"], k["Service.StateDirectoryMode"], k["Service.ReadWritePaths"], tc.stateDir, tc.mode, tc.rwPath)
		}
		mkdir := execrun.Command{Argv: []string{"sudo", "install", "-d", "-m", "0711", tc.dir}}
		if got := strings.Contains(string(unit), "# "+strings.Repeat(" ", 9)+mkdir.String()+"   (ReadWritePaths="); got != tc.mkdir {
			t.Errorf("%s: install comment names mkdir: %v, want %v", tc.dir, got, tc.mkdir)
		}
	}
	unit, err = MonitorUnit(linuxProgram)
	if err != nil {
		t.Fatal(err)
	}
	k = unitKeys(t, unit)
	if !strings.HasSuffix(k["Service.ExecStart"], " monitor") || k["Install.WantedBy"] != "default.target" {
		t.Errorf("monitor unit: ExecStart %q, WantedBy %q", k["Service.ExecStart"], k["Install.WantedBy"])
	}
}

func TestExecLineQuoting(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/bin/macake", "watch"}, "/usr/bin/macake watch"},
		{[]string{"/opt/my apps/macake", "watch"}, `"/opt/my apps/macake" watch`},
		{[]string{"/opt/100%/macake", "--state-dir", "/var/$HOME"}, "/opt/100%%/macake --state-dir /var/$$HOME"},
		{[]string{"/a\"b\\c", "x'y", ""}, `"/a\"b\\c" "x'y" ""`},
		{[]string{"/bin/x", ";"}, `/bin/x ";"`},
	} {
		got, err := execLine(tc.argv)
		if err != nil || got != tc.want {
			t.Errorf("execLine(%q) = %q, %v; want %q", tc.argv, got, err, tc.want)
		}
	}
	if _, err := execLine([]string{"/bin/x\ny"}); err == nil {
		t.Error("a newline in an argument was accepted")
	}
}

// TestWatchUnitVerifies: systemd itself accepts every key of the
// watch unit (an unknown or misspelt one is silently ignored at run time,
// so a sandbox setting could vanish unnoticed). Needs systemd-analyze.
func TestWatchUnitVerifies(t *testing.T) {
	analyze := ""
	for _, p := range []string{"/usr/bin/systemd-analyze", "/bin/systemd-analyze"} {
		if _, err := os.Stat(p); err == nil {
			analyze = p
		}
	}
	if analyze == "" {
		t.Skip("skipping: systemd-analyze not found (a Linux machine with systemd has it)")
	}
	p := examplesProgram
	p.Binary = "/bin/true" // verify checks that ExecStart's program exists
	for _, dir := range []string{"/var/db/macake", "/var/lib/macake", "/srv/my state", "/var/lib/macake 100%"} {
		p.StateDir = dir
		unit, err := WatchUnit(p)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "macake-watch.service")
		if err := os.WriteFile(path, unit, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := execrun.Command{Argv: []string{analyze, "verify", path}}
		res, err := execrun.Exec{}.Run(context.Background(), cmd)
		if _, err := execrun.Check(cmd, res, err); err != nil || len(res.Stderr) > 0 {
			t.Errorf("state dir %s: systemd-analyze verify: %v\n%s", dir, err, res.Stderr)
		}
	}
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

// FuzzSplitExecStart: what WatchUnit writes splits back into
// the same words, and no input panics.
func FuzzSplitExecStart(f *testing.F) {
	f.Add("/usr/local/bin/macake", "/etc/macake/links.d", "/var/db/macake")
	f.Add("/opt/my tools/macake", `/etc/"quoted"`, "/var/lib/100%/$x")
	f.Add("/a", "/b;", `/c\d`)
	f.Fuzz(func(t *testing.T, bin, cfg, st string) {
		SplitExecStart(bin + " " + cfg + " " + st) // any text: no panic
		prog := service.Program{Binary: bin, ConfigDir: cfg, StateDir: st}
		unit, err := WatchUnit(prog)
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

// TestStateDirModeIsOne: the mode the unit gives systemd's state
// directory and the one install-daemon creates another with are one.
func TestStateDirModeIsOne(t *testing.T) {
	if got := fmt.Sprintf("%04o", stateDirPerm); got != StateDirMode {
		t.Errorf("stateDirPerm %s, StateDirMode %s", got, StateDirMode)
	}
}
