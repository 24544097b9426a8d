// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/golden"
)

// examplesProgram is what the shipped examples run: `make install`'s
// default prefix and the CLI's default directories, on macOS;
// linuxProgram is the same on Linux, where state lives in /var/lib.
var (
	examplesProgram = Program{Binary: "/usr/local/bin/macake", ConfigDir: "/etc/macake/links.d", StateDir: config.DefaultStateDirFor("darwin")}
	linuxProgram    = Program{Binary: "/usr/local/bin/macake", ConfigDir: "/etc/macake/links.d", StateDir: config.DefaultStateDirFor("linux")}
)

const exampleHome = "/Users/you"

// lint is the plutil -lint equivalent: the XML declaration and Apple DOCTYPE
// are there, and the document decodes strictly. It returns the root dict.
func lint(t *testing.T, doc []byte) Dict {
	t.Helper()
	if !bytes.HasPrefix(doc, []byte(xmlHeader+doctype)) {
		t.Fatalf("plist does not start with the XML declaration and the Apple DOCTYPE:\n%s", doc)
	}
	v, err := Decode(doc)
	if err != nil {
		t.Fatalf("plist does not lint: %v\n%s", err, doc)
	}
	d, ok := v.(Dict)
	if !ok {
		t.Fatalf("plist root is %T, want a dict", v)
	}
	return d
}

// wantJob checks the keys every macake job must have, with their types.
func wantJob(t *testing.T, d Dict, label string, args []string, logPath string) {
	t.Helper()
	want := Dict{
		{"Label", String(label)},
		{"ProgramArguments", stringArray(args)},
		{"RunAtLoad", Bool(true)},
		{"KeepAlive", Dict{{"SuccessfulExit", Bool(false)}}},
		{"ThrottleInterval", Integer(30)},
		{"ProcessType", String("Standard")},
		{"StandardOutPath", String(logPath)},
		{"StandardErrorPath", String(logPath)},
	}
	if !reflect.DeepEqual(d.Keys(), want.Keys()) {
		t.Errorf("keys = %v, want %v", d.Keys(), want.Keys())
	}
	for _, e := range want {
		if got := d.Get(e.Key); !reflect.DeepEqual(got, e.Value) {
			t.Errorf("%s = %#v, want %#v", e.Key, got, e.Value)
		}
	}
}

func TestDaemonPlist(t *testing.T) {
	doc, err := DaemonPlist(examplesProgram)
	if err != nil {
		t.Fatal(err)
	}
	d := lint(t, doc)
	wantJob(t, d, "org.macake.watch",
		[]string{"/usr/local/bin/macake", "--config-dir", "/etc/macake/links.d", "--state-dir", "/var/db/macake", "watch", "--log-file", "/var/log/macake/watch.log"},
		"/var/log/macake/watch.stderr.log")
	again, _ := DaemonPlist(examplesProgram)
	if !bytes.Equal(doc, again) {
		t.Error("rendering is not deterministic")
	}
}

func TestAgentPlist(t *testing.T) {
	doc, err := AgentPlist(examplesProgram, exampleHome)
	if err != nil {
		t.Fatal(err)
	}
	wantJob(t, lint(t, doc), "org.macake.monitor",
		[]string{"/usr/local/bin/macake", "--config-dir", "/etc/macake/links.d", "--state-dir", "/var/db/macake", "monitor", "--log-file", "/Users/you/Library/Logs/macake/monitor.log"},
		"/Users/you/Library/Logs/macake/monitor.stderr.log")
	if _, err := AgentPlist(examplesProgram, "relative/home"); err == nil {
		t.Error("a relative home directory was accepted")
	}
}

// TestPlistEscapesPaths: paths with XML metacharacters and spaces reach
// launchd byte for byte.
func TestPlistEscapesPaths(t *testing.T) {
	p := Program{Binary: "/Applications/Tom & Jerry <dev>/macake", ConfigDir: "/etc/a'b\"c", StateDir: "/var/db/ü"}
	doc, err := DaemonPlist(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("Tom &amp; Jerry &lt;dev&gt;")) {
		t.Errorf("metacharacters not escaped:\n%s", doc)
	}
	args := lint(t, doc).Get("ProgramArguments")
	if want := stringArray(DaemonArgs(p)); !reflect.DeepEqual(args, want) {
		t.Errorf("ProgramArguments = %#v, want %#v", args, want)
	}
}

func TestProgramValidate(t *testing.T) {
	for name, p := range map[string]Program{
		"relative binary": {Binary: "macake", ConfigDir: "/etc/macake/links.d", StateDir: "/var/db/macake"},
		"empty binary":    {ConfigDir: "/etc/macake/links.d", StateDir: "/var/db/macake"},
		"relative config": {Binary: "/bin/macake", ConfigDir: "links.d", StateDir: "/var/db/macake"},
		"relative state":  {Binary: "/bin/macake", ConfigDir: "/etc", StateDir: "db"},
		"control char":    {Binary: "/bin/mac\x07ake", ConfigDir: "/etc", StateDir: "/db"},
	} {
		if _, err := DaemonPlist(p); err == nil {
			t.Errorf("%s: DaemonPlist accepted %+v", name, p)
		}
		if _, err := SystemdWatchUnit(p); err == nil {
			t.Errorf("%s: SystemdWatchUnit accepted %+v", name, p)
		}
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

func TestSystemdUnits(t *testing.T) {
	unit, err := SystemdWatchUnit(linuxProgram)
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
		unit, err := SystemdWatchUnit(p)
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
	unit, err = SystemdMonitorUnit(linuxProgram)
	if err != nil {
		t.Fatal(err)
	}
	k = unitKeys(t, unit)
	if !strings.HasSuffix(k["Service.ExecStart"], " monitor") || k["Install.WantedBy"] != "default.target" {
		t.Errorf("monitor unit: ExecStart %q, WantedBy %q", k["Service.ExecStart"], k["Install.WantedBy"])
	}
}

func TestSystemdExecLineQuoting(t *testing.T) {
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
		got, err := systemdExecLine(tc.argv)
		if err != nil || got != tc.want {
			t.Errorf("systemdExecLine(%q) = %q, %v; want %q", tc.argv, got, err, tc.want)
		}
	}
	if _, err := systemdExecLine([]string{"/bin/x\ny"}); err == nil {
		t.Error("a newline in an argument was accepted")
	}
}

// TestExamplesMatchRenderer keeps examples/launchd and examples/systemd
// identical to what the renderers produce; `go test ./launchd -update`
// rewrites them.
func TestExamplesMatchRenderer(t *testing.T) {
	daemon, err := DaemonPlist(examplesProgram)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := AgentPlist(examplesProgram, exampleHome)
	if err != nil {
		t.Fatal(err)
	}
	watchUnit, err := SystemdWatchUnit(linuxProgram)
	if err != nil {
		t.Fatal(err)
	}
	monitorUnit, err := SystemdMonitorUnit(linuxProgram)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{
		"../examples/launchd/" + DaemonLabel + ".plist": daemon,
		"../examples/launchd/" + AgentLabel + ".plist":  agent,
		"../examples/systemd/macake-watch.service":      watchUnit,
		"../examples/systemd/macake-monitor.service":    monitorUnit,
	} {
		golden.Check(t, path, want, "the example must be what the renderer writes")
	}
}

// TestExamplesPassPlutil runs Apple's own linter on the shipped plists
// where it exists (macOS); elsewhere the strict Decode above stands in.
func TestExamplesPassPlutil(t *testing.T) {
	const plutil = "/usr/bin/plutil"
	if _, err := os.Stat(plutil); err != nil {
		t.Skip("plutil not available (not macOS); the strict decoder checks the plists instead")
	}
	for _, name := range []string{DaemonLabel, AgentLabel} {
		path, _ := filepath.Abs("../examples/launchd/" + name + ".plist")
		cmd := execrun.Command{Argv: []string{plutil, "-lint", path}}
		res, err := execrun.Exec{}.Run(context.Background(), cmd)
		if _, err := execrun.Check(cmd, res, err); err != nil {
			t.Errorf("plutil -lint: %v", err)
		}
	}
}

// TestSystemdWatchUnitVerifies: systemd itself accepts every key of the
// watch unit (an unknown or misspelt one is silently ignored at run time,
// so a sandbox setting could vanish unnoticed). Needs systemd-analyze.
func TestSystemdWatchUnitVerifies(t *testing.T) {
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
		unit, err := SystemdWatchUnit(p)
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
