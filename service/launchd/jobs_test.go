// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/service"
)

// examplesProgram is what the shipped examples run: `make install`'s
// default prefix and the CLI's default directories, on macOS.
var (
	examplesProgram = service.Program{Binary: "/usr/local/bin/macake", ConfigDir: "/etc/macake/links.d", StateDir: settings.DefaultStateDirFor("darwin")}
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
	p := service.Program{Binary: "/Applications/Tom & Jerry <dev>/macake", ConfigDir: "/etc/a'b\"c", StateDir: "/var/db/ü"}
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

// TestExamplesMatchRenderer keeps examples/launchd identical to what the
// renderers produce; `go test ./service/launchd -update` rewrites them.
func TestExamplesMatchRenderer(t *testing.T) {
	daemon, err := DaemonPlist(examplesProgram)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := AgentPlist(examplesProgram, exampleHome)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{
		"../../examples/launchd/" + DaemonLabel + ".plist": daemon,
		"../../examples/launchd/" + AgentLabel + ".plist":  agent,
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
		path, _ := filepath.Abs("../../examples/launchd/" + name + ".plist")
		cmd := execrun.Command{Argv: []string{plutil, "-lint", path}}
		res, err := execrun.Exec{}.Run(context.Background(), cmd)
		if _, err := execrun.Check(cmd, res, err); err != nil {
			t.Errorf("plutil -lint: %v", err)
		}
	}
}
