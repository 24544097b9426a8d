// SPDX-License-Identifier: Apache-2.0

package systemd_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/macake/macake/service"
	"github.com/macake/macake/service/servicetest"
	"github.com/macake/macake/service/systemd"
	"github.com/macake/macake/service/systemd/systemdtest"
)

const home = "/home/you"

var program = service.Program{Binary: "/usr/local/bin/macake", ConfigDir: "/etc/macake/links.d", StateDir: "/var/lib/macake"}

// machine is a fake Linux machine running systemd, with an installed,
// root-owned /usr/local/bin/macake.
type machine struct {
	files     *servicetest.Files
	systemctl *systemdtest.Systemctl
	m         systemd.Manager
	ran       []string
}

func newMachine() *machine {
	files := servicetest.NewFiles(systemd.BootedMarker, "/etc/systemd/system", "/etc/macake/links.d", home)
	files.AddFile("/usr/local/bin/macake", []byte("binary"), 0o755, 0, 0)
	sc := systemdtest.New(files, home)
	return &machine{files: files, systemctl: sc, m: systemd.Manager{Host: service.Host{GOOS: "linux", Files: files, Runner: sc}}}
}

func (m *machine) progress() service.Progress {
	return service.Progress{Done: func(s service.Step) { m.ran = append(m.ran, s.String()) }}
}

// install installs the daemon (or the agent) and returns the steps it
// carried out.
func (m *machine) install(t *testing.T, req service.InstallRequest) ([]string, *service.Report) {
	t.Helper()
	m.ran = nil
	rep, err := m.m.Install(context.Background(), req, m.progress())
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	return m.ran, rep
}

// TestInstallDaemon: a fresh install writes the unit, has systemd read
// it, enables it and starts it; a second one does nothing and only asks;
// --restart restarts; another program rewrites the unit and restarts the
// running daemon with it (issue 27, item 1).
func TestInstallDaemon(t *testing.T) {
	m := newMachine()
	ran, rep := m.install(t, service.InstallRequest{Program: program})
	servicetest.WantRan(t, "fresh install", ran,
		"write /etc/systemd/system/macake-watch.service (root:root 0644)",
		"run systemctl daemon-reload",
		"run systemctl enable macake-watch.service",
		"run systemctl start macake-watch.service",
	)
	unit, _ := systemd.WatchUnit(program)
	if got, _ := m.files.ReadFile(systemd.UnitPath); string(got) != string(unit) {
		t.Errorf("unit on disk:\n%s", got)
	}
	if fi, _ := m.files.Stat(systemd.UnitPath); fi.Mode.Perm() != 0o644 || fi.UID != 0 {
		t.Errorf("unit mode %v uid %d", fi.Mode, fi.UID)
	}
	if !m.systemctl.System.Enabled[systemd.UnitName] || !m.systemctl.System.Active[systemd.UnitName] {
		t.Errorf("not enabled and running: %+v", m.systemctl.System)
	}
	if rep.System != "systemd" || rep.Path != systemd.UnitPath || rep.LogCommand != "journalctl -u macake-watch.service -f" || !rep.Changed {
		t.Errorf("report %+v", rep)
	}

	m.systemctl.Calls = nil
	if ran, rep := m.install(t, service.InstallRequest{Program: program}); len(ran) != 0 || rep.Changed {
		t.Errorf("second install ran %q", ran)
	}
	for _, c := range m.systemctl.Calls {
		if !strings.Contains(c, " is-") && !strings.Contains(c, " show ") {
			t.Errorf("second install changed something: %q", c)
		}
	}
	if ran, _ := m.install(t, service.InstallRequest{Program: program, Restart: true}); !reflect.DeepEqual(ran, []string{"run systemctl restart macake-watch.service"}) {
		t.Errorf("--restart ran %q", ran)
	}

	m.files.AddFile("/opt/macake/bin/macake", []byte("binary"), 0o755, 0, 0)
	other := program
	other.Binary = "/opt/macake/bin/macake"
	ran, _ = m.install(t, service.InstallRequest{Program: other})
	servicetest.WantRan(t, "changed program", ran,
		"write /etc/systemd/system/macake-watch.service (root:root 0644)",
		"run systemctl daemon-reload",
		"run systemctl restart macake-watch.service",
	)
	if !strings.Contains(string(m.systemctl.System.Read[systemd.UnitName]), "ExecStart=/opt/macake/bin/macake ") {
		t.Error("systemd did not read the new unit")
	}
}

// TestInstallDaemonMendsWhatIsOff: a state directory outside /var/lib is
// created (ReadWritePaths= needs it), a masked unit unmasked, and a unit
// written by hand but never read is read before it starts.
func TestInstallDaemonMendsWhatIsOff(t *testing.T) {
	m := newMachine()
	p := program
	p.StateDir = "/srv/macake"
	ran, _ := m.install(t, service.InstallRequest{Program: p})
	if len(ran) != 5 || ran[0] != "create /srv/macake (root:root 0711)" {
		t.Errorf("state directory outside /var/lib: ran %q", ran)
	}

	m = newMachine()
	m.systemctl.OldNotFound = true
	if ran, _ := m.install(t, service.InstallRequest{Program: program}); len(ran) != 4 {
		t.Errorf("an older systemd's not-found: ran %q", ran)
	}

	m = newMachine()
	m.systemctl.System.Masked[systemd.UnitName] = true
	if ran, _ := m.install(t, service.InstallRequest{Program: program}); !reflect.DeepEqual(ran[2:4], []string{"run systemctl unmask macake-watch.service", "run systemctl enable macake-watch.service"}) {
		t.Errorf("masked: ran %q", ran)
	}

	m = newMachine()
	unit, _ := systemd.WatchUnit(program)
	m.files.AddFile(systemd.UnitPath, unit, 0o644, 0, 0) // `--systemd-unit | sudo tee`, and nothing else
	ran, _ = m.install(t, service.InstallRequest{Program: program})
	want := []string{"run systemctl daemon-reload", "run systemctl enable macake-watch.service", "run systemctl start macake-watch.service"}
	if !reflect.DeepEqual(ran, want) {
		t.Errorf("unit written by hand: ran %q, want %q", ran, want)
	}
}

// TestUninstallDaemon: stop and disable, remove the unit, have systemd
// forget it, then down; nothing the second time; down is not run when
// the daemon could not be stopped.
func TestUninstallDaemon(t *testing.T) {
	m := newMachine()
	m.install(t, service.InstallRequest{Program: program})
	m.ran = nil
	downs := 0
	rep, err := m.m.Uninstall(context.Background(), service.UninstallRequest{Down: func() int { downs++; return 0 }}, m.progress())
	want := []string{
		"run systemctl disable --now macake-watch.service",
		"remove /etc/systemd/system/macake-watch.service",
		"run systemctl daemon-reload",
	}
	if err != nil || !reflect.DeepEqual(m.ran, want) || downs != 1 || *rep.DownExitCode != 0 {
		t.Fatalf("uninstall: %v, ran %q, downs %d", err, m.ran, downs)
	}
	if m.systemctl.System.Active[systemd.UnitName] || m.systemctl.System.Read[systemd.UnitName] != nil {
		t.Errorf("still there: %+v", m.systemctl.System)
	}
	m.ran = nil
	if rep, err := m.m.Uninstall(context.Background(), service.UninstallRequest{}, m.progress()); err != nil || rep.Changed || len(m.ran) != 0 {
		t.Errorf("second uninstall: %+v, %v, ran %q", rep, err, m.ran)
	}

	m = newMachine()
	m.install(t, service.InstallRequest{Program: program})
	m.systemctl.Fail("disable", 1, "Failed to disable unit: Access denied", -1)
	downs = 0
	rep, err = m.m.Uninstall(context.Background(), service.UninstallRequest{Down: func() int { downs++; return 0 }}, service.Progress{})
	if err == nil || downs != 0 || rep.Error == nil || !strings.Contains(rep.Error.Message, "Access denied") {
		t.Errorf("failed disable: %v, downs %d", err, downs)
	}
}

// TestWithoutSystemd: where systemd is not the running init (a container,
// this test machine), a real run says so and what to do instead, and
// changes nothing; a dry run shows what a machine with systemd gets.
func TestWithoutSystemd(t *testing.T) {
	m := newMachine()
	m.files.Remove(systemd.BootedMarker)
	_, err := m.m.Install(context.Background(), service.InstallRequest{Program: program}, service.Progress{})
	var unavailable *service.UnavailableError
	if !errors.As(err, &unavailable) || !strings.Contains(err.Error(), "systemd is not running on this machine") || !strings.Contains(err.Error(), "macake watch") {
		t.Errorf("install: %v", err)
	}
	rep, err := m.m.Install(context.Background(), service.InstallRequest{Program: program, DryRun: true}, service.Progress{})
	if err != nil || len(rep.Steps) != 4 || rep.Content == "" || len(rep.Warnings) != 1 {
		t.Errorf("dry run: %+v, %v", rep, err)
	}
	if _, err := m.m.Uninstall(context.Background(), service.UninstallRequest{}, service.Progress{}); !errors.As(err, &unavailable) {
		t.Errorf("uninstall: %v", err)
	}
	if len(m.systemctl.Calls) != 0 {
		t.Errorf("ran systemctl: %q", m.systemctl.Calls)
	}
}

// TestInstallAgent: the user unit goes into ~/.config/systemd/user and
// the user's own systemd; without one (ssh, no user manager) the file is
// installed and a note says how to start it.
func TestInstallAgent(t *testing.T) {
	m := newMachine()
	m.files.UID, m.files.GID = 1000, 1000
	req := service.InstallRequest{Program: program, Agent: true, Home: home, UID: 1000}
	ran, rep := m.install(t, req)
	servicetest.WantRan(t, "agent install", ran,
		"create /home/you/.config/systemd/user (0755)",
		"write /home/you/.config/systemd/user/macake-monitor.service (0644)",
		"run systemctl --user daemon-reload",
		"run systemctl --user enable macake-monitor.service",
		"run systemctl --user start macake-monitor.service",
	)
	if fi, _ := m.files.Stat(systemd.MonitorUnitPath(home)); fi.UID != 1000 || rep.LogCommand != "journalctl --user -u macake-monitor.service -f" {
		t.Errorf("unit owned by %d; report %+v", fi.UID, rep)
	}
	if ran, _ := m.install(t, req); len(ran) != 0 {
		t.Errorf("second agent install ran %q", ran)
	}

	m = newMachine()
	m.systemctl.NoUserBus = true
	var notes []string
	rep, err := m.m.Install(context.Background(), req, service.Progress{Note: func(n string) { notes = append(notes, n) }})
	if err != nil || !rep.Observed.NoSession || len(rep.Steps) != 2 || len(notes) != 1 || !strings.Contains(notes[0], "systemctl --user enable --now macake-monitor.service") {
		t.Errorf("without a user manager: %+v, %v, notes %q", rep, err, notes)
	}
}
