// SPDX-License-Identifier: Apache-2.0

// Package systemdtest provides a fake of systemctl for tests of code that
// installs systemd units, so they run without systemd (CI containers and
// the test machine have none).
package systemdtest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/service/servicetest"
	"github.com/macake/macake/service/systemd"
)

// Manager is one systemd instance (the system's, or a user's) as the fake
// keeps it: the unit files as it last read them, and each unit's state.
type Manager struct {
	// Read maps a unit name to its file's bytes at the last daemon-reload.
	Read map[string][]byte
	// Enabled and Active say whether a unit starts at boot (login) and
	// runs now; Masked whether it is masked.
	Enabled, Active, Masked map[string]bool
}

func newManager() *Manager {
	return &Manager{Read: map[string][]byte{}, Enabled: map[string]bool{}, Active: map[string]bool{}, Masked: map[string]bool{}}
}

// Systemctl is an execrun.Runner that answers systemctl as systemd 252
// (Debian 12) does for what package systemd asks, from its manual pages
// (there is no systemd on the machines the tests run on): is-enabled
// prints the state (exit 1 for disabled, "not-found" for an unknown unit), is-active
// prints it (exit 3 when not active), show --property=NeedDaemonReload
// --value says whether the file changed since the last daemon-reload,
// start of a unit it has not read fails with exit 5, "Unit … not found".
type Systemctl struct {
	files *servicetest.Files
	// System is the system manager; User the user's (--user).
	System, User *Manager
	// SystemDir and UserDir are where each reads unit files.
	SystemDir, UserDir string
	// NoUserBus makes --user fail as over ssh without a user manager.
	NoUserBus bool
	// OldNotFound makes is-enabled of an unknown unit answer as systemd
	// before 250 did: an error on stderr, nothing on stdout.
	OldNotFound bool
	failures    map[string]failure
	// Calls records every command line run, in order.
	Calls []string
}

type failure struct {
	res execrun.Result
	n   int
}

// New returns a systemd with nothing installed that reads unit files from
// files: the system's from /etc/systemd/system, the user's from home's
// ~/.config/systemd/user.
func New(files *servicetest.Files, home string) *Systemctl {
	return &Systemctl{files: files, System: newManager(), User: newManager(),
		SystemDir: filepath.Dir(systemd.UnitPath), UserDir: filepath.Dir(systemd.MonitorUnitPath(home)), failures: map[string]failure{}}
}

// Fail makes the next n calls of subcommand sub (all of them when n is
// -1) exit with code and print msg on stderr.
func (s *Systemctl) Fail(sub string, code int, msg string, n int) {
	s.failures[sub] = failure{res: execrun.Result{ExitCode: code, Stderr: []byte(msg + "\n")}, n: n}
}

func out(code int, stdout string) (execrun.Result, error) {
	return execrun.Result{ExitCode: code, Stdout: []byte(stdout)}, nil
}

func fail(code int, stderr string) (execrun.Result, error) {
	return execrun.Result{ExitCode: code, Stderr: []byte(stderr)}, nil
}

// Run implements execrun.Runner.
func (s *Systemctl) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	s.Calls = append(s.Calls, strings.Join(cmd.Argv, " "))
	argv := cmd.Argv
	if len(argv) < 2 || argv[0] != systemd.Systemctl {
		return execrun.Result{}, fmt.Errorf("fake systemctl: unexpected command %q", argv)
	}
	m, dir := s.System, s.SystemDir
	args := argv[1:]
	if args[0] == "--user" {
		if s.NoUserBus {
			return fail(1, "Failed to connect to bus: No medium found\n")
		}
		m, dir, args = s.User, s.UserDir, args[1:]
	}
	sub := args[0]
	if f, ok := s.failures[sub]; ok && f.n != 0 {
		f.n--
		s.failures[sub] = f
		return f.res, nil
	}
	unit := args[len(args)-1]
	file := func() ([]byte, bool) {
		b, err := s.files.ReadFile(filepath.Join(dir, unit))
		return b, err == nil
	}
	switch sub {
	case "daemon-reload":
		m.Read = map[string][]byte{}
		for name := range map[string]bool{systemd.UnitName: true, systemd.MonitorUnitName: true} {
			if b, err := s.files.ReadFile(filepath.Join(dir, name)); err == nil {
				m.Read[name] = b
			}
		}
		return out(0, "")
	case "is-enabled":
		_, onDisk := file()
		switch {
		case m.Masked[unit]:
			return out(1, "masked\n")
		case m.Enabled[unit]:
			return out(0, "enabled\n")
		case onDisk || m.Read[unit] != nil:
			return out(1, "disabled\n")
		}
		if s.OldNotFound {
			return fail(1, "Failed to get unit file state for "+unit+": No such file or directory\n")
		}
		return out(1, "not-found\n")
	case "is-active":
		if m.Active[unit] {
			return out(0, "active\n")
		}
		return out(3, "inactive\n")
	case "show":
		b, onDisk := file()
		if onDisk && m.Read[unit] != nil && string(b) != string(m.Read[unit]) || onDisk && m.Read[unit] == nil {
			return out(0, "yes\n")
		}
		return out(0, "no\n")
	case "unmask":
		delete(m.Masked, unit)
		return out(0, "")
	case "enable":
		if m.Masked[unit] {
			return fail(1, "Failed to enable unit: Unit file "+unit+" is masked.\n")
		}
		if _, onDisk := file(); !onDisk {
			return fail(1, "Failed to enable unit: Unit file "+unit+" does not exist.\n")
		}
		m.Enabled[unit] = true
		return out(0, "Created symlink …\n")
	case "start", "restart":
		if m.Read[unit] == nil {
			return fail(5, "Failed to "+sub+" "+unit+": Unit "+unit+" not found.\n")
		}
		m.Active[unit] = true
		return out(0, "")
	case "disable":
		delete(m.Enabled, unit)
		if len(args) > 2 && args[1] == "--now" {
			delete(m.Active, unit)
		}
		return out(0, "")
	case "stop":
		delete(m.Active, unit)
		return out(0, "")
	}
	return fail(1, "Unknown command verb "+sub+".\n")
}
