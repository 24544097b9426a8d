// SPDX-License-Identifier: Apache-2.0

// Package service runs macake as a service of the system's service
// manager: `macake watch` as the root daemon that keeps links shaped
// across reboots, and `macake monitor` as the user's agent. The managers
// are backends behind one small interface (Manager), registered by their
// packages: service/launchd (macOS: a LaunchDaemon and a LaunchAgent) and
// service/systemd (Linux: a system unit and a user unit). Each renders its
// service file, observes what is installed, plans the steps as data and
// carries them out, idempotently.
//
// The service commands' whole flow is here and in the backends
// (ResolveProgram, Install, Uninstall, and the Report they print as JSON
// or as text), so the CLI only parses flags, checks who runs it and
// prints. Rendering and planning are pure; the machine is behind Host (the
// Files and execrun.Runner interfaces), so everything is tested on Linux
// with fakes (servicetest, launchdtest, systemdtest).
package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/macake/macake/diag"
	"github.com/macake/macake/execrun"
)

// Host is the machine the service commands act on: its OS, its file
// system, the manager's tool, where the running binary is, and how to
// wait. The CLI fills it with the real ones; tests with fakes.
type Host struct {
	// GOOS is the machine's OS; it chooses the manager (For).
	GOOS string
	// Files is the file system; OSFiles{} for real.
	Files Files
	// Runner runs the manager's tool (launchctl, systemctl); execrun.Exec{}
	// for real.
	Runner execrun.Runner
	// Executable returns the running binary's path (os.Executable), the
	// program a job runs unless another binary is asked for.
	Executable func() (string, error)
	// Sleep waits between polls of a job that is still going away; nil
	// means time.Sleep.
	Sleep func(time.Duration)
}

// Manager installs and removes macake's services with one service
// manager. Both calls may be repeated: what is installed as asked is
// left alone.
type Manager interface {
	// Available says why the machine has no such manager to install
	// into (an *UnavailableError), or nil.
	Available() error
	// Install makes the machine run req's job: it renders the service
	// file, observes what is installed and running, plans the steps
	// (nothing when all is as asked) and, unless a dry run, carries them
	// out. The report is nil when it stopped before planning (an
	// unusable request, a *RequestError, or a machine it could not
	// read); after a failed step it is returned with the error, which it
	// also records.
	Install(ctx context.Context, req InstallRequest, p Progress) (*Report, error)
	// Uninstall stops req's job and removes its file, then, for the
	// daemon, runs req.Down. When a step fails, down is not run: the
	// daemon may still be running and would re-apply what down removes.
	// The report is nil when it could not read the machine; otherwise it
	// is returned with any error, which it also records: a *DownError
	// when only down failed.
	Uninstall(ctx context.Context, req UninstallRequest, p Progress) (*Report, error)
}

var (
	registryMu sync.Mutex
	registry   = map[string]func(Host) Manager{}
)

// Register makes open the manager of systems goos; the backends' init
// functions call it.
func Register(goos string, open func(Host) Manager) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[goos] = open
}

// For returns the manager of h's system, or an *UnavailableError naming
// the systems macake has one for.
func For(h Host) (Manager, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if open, ok := registry[h.GOOS]; ok {
		return open(h), nil
	}
	var have []string
	for goos := range registry {
		have = append(have, goos)
	}
	sort.Strings(have)
	return nil, &UnavailableError{Err: fmt.Errorf("macake installs services on %s only, not on %s; run `macake watch` under this system's own service manager", strings.Join(have, " and "), h.GOOS)}
}

// ProgramRequest says what a service should run.
type ProgramRequest struct {
	// Binary is the macake executable; "" is the running one
	// (Host.Executable).
	Binary string
	// ConfigDir and StateDir are the directories the job is to use; they
	// are made absolute.
	ConfigDir, StateDir string
	// Agent asks for the user's agent (monitor), which runs as the user:
	// the checks that protect root do not apply to it.
	Agent bool
	// Lenient turns a missing or non-executable binary into a warning:
	// for a dry run, or a service file rendered for another machine.
	Lenient bool
}

// ResolveProgram works out what a job runs: the binary, made absolute but
// not symlink-resolved (Homebrew's /opt/homebrew/bin/macake is a stable
// symlink into a versioned Cellar path that an upgrade deletes), and the
// absolute config and state directories. It checks the binary and warns
// (through p, and in the returned list) about what would make the job
// fragile or unsafe. A *RequestError is a binary or path that cannot be
// used.
func ResolveProgram(h Host, req ProgramRequest, p Progress) (Program, []string, error) {
	var warnings []string
	warn := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		warnings = append(warnings, msg)
		p.Warn(msg)
	}
	binary := req.Binary
	if binary == "" {
		exe, err := h.Executable()
		if err != nil {
			return Program{}, nil, fmt.Errorf("cannot tell where this program is (%v); pass --binary PATH", err)
		}
		binary = exe
		if strings.Contains(binary, "/go-build") {
			warn("%s looks like a temporary `go run` build that will disappear; pass --binary with an installed macake", binary)
		}
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	prog := Program{Binary: abs(binary), ConfigDir: abs(req.ConfigDir), StateDir: abs(req.StateDir)}
	if err := prog.Validate(); err != nil {
		return prog, nil, &RequestError{Err: err}
	}
	fi, err := h.Files.Stat(prog.Binary)
	problem := ""
	switch {
	case errors.Is(err, fs.ErrNotExist):
		problem = "no such file"
	case err != nil:
		problem = err.Error()
	case fi.IsDir || fi.Mode.Perm()&0o111 == 0:
		problem = "not an executable file"
	}
	if problem != "" {
		if !req.Lenient {
			return prog, nil, RequestErrorf("--binary %s: %s; pass the path of an installed macake", prog.Binary, problem)
		}
		warn("%s: %s", prog.Binary, problem)
	}
	if !req.Agent && err == nil {
		// A root daemon running a file its user can replace hands root to
		// anything running as that user.
		if dfi, derr := h.Files.Stat(filepath.Dir(prog.Binary)); derr == nil {
			for _, f := range []struct {
				path string
				fi   FileInfo
			}{{prog.Binary, fi}, {filepath.Dir(prog.Binary), dfi}} {
				if f.fi.UID > 0 || f.fi.Mode.Perm()&0o022 != 0 {
					warn("%s is writable by someone other than root (owner uid %d, mode %04o): whoever can change it can replace what the daemon runs as root; "+
						"install a copy where only root can write (make build man completions, then sudo make install PREFIX=/opt/macake) and pass --binary /opt/macake/bin/macake", f.path, f.fi.UID, f.fi.Mode.Perm())
					break
				}
			}
		}
	}
	if !req.Agent {
		if _, err := h.Files.Stat(prog.ConfigDir); errors.Is(err, fs.ErrNotExist) {
			warn("%s does not exist yet: watch shapes nothing until a policy file is there", prog.ConfigDir)
		}
	}
	return prog, warnings, nil
}

// InstallRequest is one install of the daemon (watch) or the user's agent
// (monitor).
type InstallRequest struct {
	// Program is what the job runs (ResolveProgram); Warnings are the
	// warnings met resolving it, which the report lists first.
	Program  Program
	Warnings []string
	// Agent installs the user's agent, for the user UID whose home
	// directory is Home (absolute), instead of the daemon.
	Agent bool
	Home  string
	UID   int
	// DryRun plans without changing anything; the report then carries
	// the rendered service file.
	DryRun bool
	// Restart restarts a job that is already installed and running as
	// asked.
	Restart bool
}

// UninstallRequest is one removal of the daemon or the user's agent.
type UninstallRequest struct {
	// Agent removes the user's agent of the user UID with home directory
	// Home instead of the daemon.
	Agent bool
	Home  string
	UID   int
	// DryRun plans without changing anything.
	DryRun bool
	// Down runs `macake down` and returns its exit status. It is run
	// after the daemon is gone, since the daemon leaves its shaping in
	// place when stopped (the manager would restart it) and uninstalling
	// means the user wants it gone. nil runs nothing.
	Down func() int
}

// FinishUninstall is the end every manager's Uninstall shares, once its
// steps are done: it tells p, then, for the daemon, runs req.Down and
// records its exit status.
func FinishUninstall(rep *Report, req UninstallRequest, p Progress) (*Report, error) {
	p.Finished(rep)
	if req.Agent || req.Down == nil {
		return rep, nil
	}
	code := req.Down()
	rep.DownExitCode = &code
	if code != 0 {
		err := &DownError{ExitCode: code}
		rep.Error = diag.OfPtr(err)
		return rep, err
	}
	return rep, nil
}
