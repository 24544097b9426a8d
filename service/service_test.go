// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/macake/macake/service"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/servicetest"
	"github.com/macake/macake/service/systemd"
)

var program = service.Program{Binary: "/usr/local/bin/macake", ConfigDir: "/etc/macake/links.d", StateDir: "/var/db/macake"}

// fakeHost is a machine with an installed, root-owned /usr/local/bin/macake.
func fakeHost() (service.Host, *servicetest.Files) {
	files := servicetest.NewFiles("/etc/macake/links.d")
	files.AddFile("/usr/local/bin/macake", []byte("binary"), 0o755, 0, 0)
	return service.Host{GOOS: "darwin", Files: files,
		Executable: func() (string, error) { return "/usr/local/bin/macake", nil }}, files
}

// said collects what a Progress hears, in order.
type said struct{ lines []string }

func (s *said) progress() service.Progress {
	return service.Progress{
		Warning: func(m string) { s.lines = append(s.lines, "warning: "+m) },
		Note:    func(m string) { s.lines = append(s.lines, "note: "+m) },
	}
}

func TestResolveProgram(t *testing.T) {
	h, files := fakeHost()
	files.AddFile("/home/me/bin/macake", []byte("binary"), 0o755, 501, 20)
	req := service.ProgramRequest{ConfigDir: "/etc/macake/links.d", StateDir: "/var/db/macake"}
	var s said
	p, warnings, err := service.ResolveProgram(h, req, s.progress())
	if err != nil || p != program || len(warnings) != 0 || len(s.lines) != 0 {
		t.Fatalf("default: %+v, %q, %v, said %q", p, warnings, err, s.lines)
	}

	// What cannot work is the request's fault; a lenient request warns.
	req.Binary = "/nonexistent/macake"
	var reqErr *service.RequestError
	if _, _, err := service.ResolveProgram(h, req, service.Progress{}); !errors.As(err, &reqErr) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing binary: %v, want a RequestError", err)
	}
	req.Lenient = true
	s = said{}
	if _, warnings, err := service.ResolveProgram(h, req, s.progress()); err != nil || len(warnings) != 1 || !slices.Equal(s.lines, []string{"warning: " + warnings[0]}) {
		t.Errorf("lenient: %q, %v, said %q", warnings, err, s.lines)
	}

	// A root daemon running a user's file hands root to that user; an
	// agent runs as the user anyway.
	req = service.ProgramRequest{Binary: "/home/me/bin/macake", ConfigDir: "/srv/none", StateDir: "/var/db/macake"}
	_, warnings, _ = service.ResolveProgram(h, req, service.Progress{})
	if len(warnings) != 2 || !strings.Contains(warnings[0], "writable by someone other than root") || !strings.Contains(warnings[1], "/srv/none does not exist yet") {
		t.Errorf("daemon warnings %q", warnings)
	}
	req.Agent = true
	if _, warnings, _ = service.ResolveProgram(h, req, service.Progress{}); len(warnings) != 0 {
		t.Errorf("agent warnings %q", warnings)
	}

	h.Executable = func() (string, error) { return "", errors.New("no /proc") }
	if _, _, err := service.ResolveProgram(h, service.ProgramRequest{ConfigDir: "/a", StateDir: "/b"}, service.Progress{}); err == nil || errors.As(err, &reqErr) {
		t.Errorf("unknown executable: %v, want a failure that is not the request's", err)
	}
}

// TestProgramValidate: every service file macake renders refuses a
// program a service cannot run (service.Program.Validate): a relative or
// empty path, which the manager would resolve against /, or a control
// character, which no plist or unit carries.
func TestProgramValidate(t *testing.T) {
	renderers := map[string]func(service.Program) ([]byte, error){
		"Validate":            func(p service.Program) ([]byte, error) { return nil, p.Validate() },
		"launchd.DaemonPlist": launchd.DaemonPlist,
		"launchd.AgentPlist":  func(p service.Program) ([]byte, error) { return launchd.AgentPlist(p, "/Users/you") },
		"systemd.WatchUnit":   systemd.WatchUnit,
		"systemd.MonitorUnit": systemd.MonitorUnit,
	}
	for name, p := range map[string]service.Program{
		"relative binary": {Binary: "macake", ConfigDir: "/etc/macake/links.d", StateDir: "/var/db/macake"},
		"empty binary":    {ConfigDir: "/etc/macake/links.d", StateDir: "/var/lib/macake"},
		"relative config": {Binary: "/bin/macake", ConfigDir: "links.d", StateDir: "/var/db/macake"},
		"relative state":  {Binary: "/bin/macake", ConfigDir: "/etc", StateDir: "db"},
		"control char":    {Binary: "/bin/mac\x07ake", ConfigDir: "/etc", StateDir: "/db"},
	} {
		for r, render := range renderers {
			if _, err := render(p); err == nil {
				t.Errorf("%s: %s accepted %+v", name, r, p)
			}
		}
	}
	if err := program.Validate(); err != nil {
		t.Errorf("a valid program: %v", err)
	}
}
