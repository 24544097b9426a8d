// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/service/systemd"
	"github.com/macake/macake/shape"
)

const homeFacts = `{"interfaces":[{"name":"en0","up":true,"default":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","ssid":"My iPhone"},{"name":"en5","up":true}]}`

// initRig runs init against a facts file in a fresh policy directory.
func initRig(t *testing.T, facts string) (dir string, run func(args ...string) (int, string, string)) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "links.d")
	factsFile := filepath.Join(t.TempDir(), "facts.json")
	os.WriteFile(factsFile, []byte(facts), 0o644)
	t.Setenv(linkfacts.EnvFile, factsFile)
	return dir, func(args ...string) (int, string, string) {
		return runCLI(t, append([]string{"--config-dir", dir}, args...)...)
	}
}

// TestInitWritesAPolicyValidateAccepts: init detects the network, asks
// nothing, writes a policy matching exactly it, whose commented defaults
// are config.Defaults', and which validate accepts; it prints the three
// commands that follow.
func TestInitWritesAPolicyValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		file  string
		mode  config.Mode
		down  string // "" for auto
		first string // the first next command
	}{
		{"detected, rates auto", nil, "my-iphone", config.ModeAutorate, "", "measure --link my-iphone"},
		{"named, with rates", []string{"home", "--download", "250mbit", "--upload", "20mbit"}, "home", config.ModeAutorate, "250mbit", "validate"},
		{"flags before the name", []string{"--mode", "fixed", "--download", "450mbit", "--upload", "22mbit", "cable"}, "cable", config.ModeFixed, "450mbit", "validate"},
		{"balanced", []string{"--mode", "balanced", "--download", "100mbit", "--upload", "10mbit"}, "my-iphone", config.ModeBalanced, "100mbit", "validate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, run := initRig(t, homeFacts)
			code, stdout, stderr := run(append([]string{"init"}, tc.args...)...)
			if code != exitcode.OK {
				t.Fatalf("init: exit %d\n%s%s", code, stdout, stderr)
			}
			path := filepath.Join(dir, tc.file+".toml")
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("no policy written: %v\n%s", err, stdout)
			}
			if code, out, errs := run("validate"); code != exitcode.OK {
				t.Fatalf("validate rejects what init wrote: exit %d\n%s%s\n%s", code, out, errs, text)
			}
			link, _, err := config.LoadFile(path, config.LoadOptions{SkipOwnershipCheck: true})
			if err != nil {
				t.Fatal(err)
			}
			if m := link.Match; m.Interface != "en0" || m.GatewayMAC.String() != "74:24:9f:00:00:01" || m.SSID != "My iPhone" || m.GatewayIP.IsValid() {
				t.Errorf("match keys %+v; want en0, the gateway's MAC and the SSID (the IP only as a comment)", m)
			}
			if link.Shaper.Mode != tc.mode {
				t.Errorf("mode %s, want %s", link.Shaper.Mode, tc.mode)
			}
			if got := link.Shaper.Download; tc.down == "" && !got.Auto || tc.down != "" && got.String() != tc.down {
				t.Errorf("download %v, want %q (\"\" = auto)", got, tc.down)
			}
			// The commented defaults are config.Defaults', not copies.
			def := config.Defaults
			wants := []string{`# queue    = "` + def.Shaper.Queue.String() + `"`, `# gateway_ip = "192.168.1.1"`}
			if tc.mode != config.ModeFixed {
				wants = append(wants, `# probe_interval  = "`+def.Autorate.ProbeInterval.String()+`"`, `# delay_threshold = "`+def.Autorate.DelayThreshold.String()+`"`)
			}
			if tc.mode == config.ModeBalanced {
				wants = append(wants, `# engage_after  = "`+def.Balanced.EngageAfter.String()+`"`)
			}
			if tc.down != "" && tc.mode == config.ModeAutorate {
				lo, _, hi, _ := link.Rates(shape.Download, 0, 0, 0)
				wants = append(wants, `# download = { min = "`+lo.String()+`", max = "`+hi.String()+`" }`)
			}
			mustContain(t, "the policy", string(text), wants...)
			mustContain(t, "init's output", stdout, "Wrote "+path, "Next:", tc.first, "plan")
			var next int
			for _, l := range strings.Split(stdout[strings.Index(stdout, "Next:"):], "\n")[1:] {
				if strings.HasPrefix(l, "  ") {
					next++
				}
			}
			if next != 3 {
				t.Errorf("%d next commands, want 3:\n%s", next, stdout)
			}
		})
	}
}

func TestInitNeverOverwrites(t *testing.T) {
	dir, run := initRig(t, homeFacts)
	path := filepath.Join(dir, "home.toml")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(path, []byte("# mine\n[match]\ninterface = \"en5\"\n"), 0o644)
	code, _, stderr := run("init", "home", "--download", "10mbit", "--upload", "1mbit")
	if code != exitcode.Failure || !strings.Contains(stderr, "never overwrites") {
		t.Errorf("init over an existing file: exit %d, %q", code, stderr)
	}
	if b, _ := os.ReadFile(path); string(b) != "# mine\n[match]\ninterface = \"en5\"\n" {
		t.Errorf("the file was changed:\n%s", b)
	}
	// A second policy for the same network would make every apply refuse:
	// nothing is written, the message cites no place in a file that is
	// not there, and says how to write it (issue 27, item 11).
	run("init", "first")
	code, _, stderr = run("init", "second")
	second := filepath.Join(dir, "second.toml")
	if code != exitcode.Failure || !strings.Contains(stderr, `link "second" would match the same network as "first"`) ||
		!strings.Contains(stderr, "(--priority 1)") || strings.Contains(stderr, second) {
		t.Errorf("a second policy for this network: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(second); err == nil {
		t.Error("the indistinguishable policy was left behind")
	}
	if code, _, stderr = run("init", "second", "--priority", "1"); code != exitcode.OK {
		t.Fatalf("init second --priority 1: exit %d, %q", code, stderr)
	}
	if code, out, stderr := run("validate"); code != exitcode.OK {
		t.Errorf("validate after init --priority: exit %d\n%s%s", code, out, stderr)
	}
	l, _, err := config.LoadFile(second, config.LoadOptions{SkipOwnershipCheck: true})
	if err != nil || l.Match.Priority != 1 {
		t.Errorf("second.toml: priority %d, %v", l.Match.Priority, err)
	}
}

func TestInitSaysWhatItCannotDetect(t *testing.T) {
	for _, tc := range []struct {
		facts string
		args  []string
		code  int
		want  string
	}{
		{`{"interfaces":[{"name":"en0","up":true}]}`, nil, exitcode.Failure, "no interface carries the default route"},
		{homeFacts, []string{"--interface", "en9"}, exitcode.Failure, "no interface en9 here (interfaces: en0, en5)"},
		{homeFacts, []string{"--interface", "en5", "--measure"}, exitcode.Failure, "interface en5 has no gateway (no route leaves through it; en0 carries the default route)"},
		{homeFacts, []string{"--download", "10mbit"}, exitcode.Usage, "both --download and --upload"},
		{homeFacts, []string{"--measure", "--download", "1mbit", "--upload", "1mbit"}, exitcode.Usage, "not both"},
		{homeFacts, []string{"--mode", "turbo"}, exitcode.Usage, "turbo"},
		{homeFacts, []string{"a", "b"}, exitcode.Usage, "one link NAME at most"},
		{homeFacts, []string{"Bad Name"}, exitcode.Usage, `link name "Bad Name"`},
		{homeFacts, []string{"Bad_Name"}, exitcode.Usage, `such as "bad_name"`},
	} {
		_, run := initRig(t, tc.facts)
		code, _, stderr := run(append([]string{"init"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("init %v: exit %d, %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	// Without a gateway MAC the IP is what tells the network apart.
	dir, run := initRig(t, `{"interfaces":[{"name":"en5","up":true,"default":true,"gateway_ip":"10.64.0.1"}]}`)
	if code, _, stderr := run("init", "--download", "30mbit", "--upload", "5mbit"); code != exitcode.OK {
		t.Fatalf("init: %d %s", code, stderr)
	}
	l, _, err := config.LoadFile(filepath.Join(dir, "en5.toml"), config.LoadOptions{})
	if err != nil || l.Match.GatewayIP.String() != "10.64.0.1" {
		t.Errorf("without a MAC: %+v, %v", l.Match, err)
	}
}

// TestInitNextStepsKeepTheDirectories: every command init prints repeats
// the --config-dir and --state-dir it was given, so that, followed as
// printed, none acts on /etc/macake or the default state directory
// (issue 27, item 10).
func TestInitNextStepsKeepTheDirectories(t *testing.T) {
	dir, _ := initRig(t, homeFacts)
	stateDir := filepath.Join(t.TempDir(), "my state")
	code, stdout, stderr := runCLI(t, "--config-dir", dir, "--state-dir", stateDir, "init")
	if code != exitcode.OK {
		t.Fatalf("init: exit %d\n%s", code, stderr)
	}
	next := strings.Split(strings.TrimSpace(stdout[strings.Index(stdout, "Next:"):]), "\n")[1:]
	for _, l := range next {
		if !strings.Contains(l, "macake --config-dir "+dir+" --state-dir '"+stateDir+"' ") {
			t.Errorf("a next step without the directories: %q", l)
		}
	}
	if len(next) != 3 || !strings.Contains(next[0], "measure --link my-iphone") {
		t.Errorf("next steps:\n%s", strings.Join(next, "\n"))
	}
}

// TestInitNextStepPerSystem: the last step keeps the link shaped where
// there is a service manager to install into (launchd, systemd), else
// shapes it once: on Linux without systemd install-daemon cannot work
// (issue 27, item 1).
func TestInitNextStepPerSystem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		machine func(t *testing.T) *fakeMac
		want    string
	}{
		{"macOS", newFakeMac, " install-daemon  # shape it now and keep it adapting (or: apply)"},
		{"Linux with systemd", newFakeLinux, " install-daemon  # shape it now and keep it adapting (or: apply)"},
		{"Linux without systemd", func(t *testing.T) *fakeMac {
			m := newFakeLinux(t)
			m.files.Remove(systemd.BootedMarker)
			return m
		}, " apply  # shape it now (run `macake watch` under your init to keep it adapting)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.machine(t)
			_, run := initRig(t, homeFacts)
			code, stdout, stderr := run("init", "home", "--download", "10mbit", "--upload", "2mbit")
			if code != exitcode.OK || !strings.Contains(stdout, tc.want) {
				t.Errorf("exit %d, stderr %q; stdout lacks %q:\n%s", code, stderr, tc.want, stdout)
			}
		})
	}
}
