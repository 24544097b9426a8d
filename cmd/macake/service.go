// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/service"
	_ "github.com/macake/macake/service/launchd" // registers launchd, the manager of macOS
	"github.com/macake/macake/service/systemd"
)

var installDaemonCmd = &command{
	name:  "install-daemon",
	args:  "[--binary PATH] [--dry-run] [--restart] [--json] [--systemd-unit]",
	short: "Install and start the system service that runs `macake watch` (launchd on macOS, systemd on Linux).",
	long: `Keeps 'macake watch' running: now, at every boot, and again if it fails. The
service runs this binary (or --binary) with the --config-dir and --state-dir
given to this command.

macOS: writes /Library/LaunchDaemons/org.macake.watch.plist (root:wheel
0644), creates /var/log/macake and loads the job with 'launchctl bootstrap
system'; watch logs to /var/log/macake/watch.log.

Linux: writes /etc/systemd/system/macake-watch.service (root:root 0644, a
sandboxed unit: see --systemd-unit), then 'systemctl daemon-reload',
'systemctl enable' and 'systemctl start'; watch logs to the journal
('journalctl -u macake-watch.service').

Idempotent: when the same service file is installed and running there is
nothing to do; a changed one is loaded and the daemon restarted with it.
Needs root, except with --dry-run, which prints the file and the steps
without changing anything. --systemd-unit prints the systemd unit (for
this machine or another) and exits.

Exit status: 0 success (installed, or nothing to do); 1 a step failed (the
report says which); 64 usage (e.g. a --binary that is no macake); 69 no
service manager to install into (systemd not running; not macOS or Linux),
except with --dry-run and --systemd-unit; 77 not root (except --dry-run).`,
}

var uninstallDaemonCmd = &command{
	name:  "uninstall-daemon",
	args:  "[--dry-run] [--json]",
	short: "Stop and remove the system service of `macake watch`, then run `macake down`.",
	long: `Stops the daemon and removes its service (macOS: boots the job out of launchd
and removes its plist; Linux: 'systemctl disable --now', removes the unit
and runs 'systemctl daemon-reload'), then runs 'macake down' to remove the
shaping that watch left in place. The logs are kept. Needs root, except
with --dry-run.

Exit status: 0 success (removed, or not installed); 1 a step failed, or
'macake down' failed afterwards (run 'sudo macake down'); 64 usage; 69 no
service manager (except --dry-run); 77 not root (except --dry-run).`,
}

var installAgentCmd = &command{
	name:  "install-agent",
	args:  "[--binary PATH] [--dry-run] [--restart] [--json] [--systemd-unit]",
	short: "Install a user service that runs `macake monitor` (a LaunchAgent on macOS, a systemd user unit on Linux).",
	long: `Runs 'macake monitor' from your login, as yourself: run it without sudo.

macOS: writes ~/Library/LaunchAgents/org.macake.monitor.plist and loads it
into your login session (launchctl bootstrap gui/UID), with its log in
~/Library/Logs/macake/monitor.log. Without a GUI login (ssh only) the plist
is installed and starts at the next login. Note that macOS 15+ Local
Network Privacy applies to agents: the gateway may be unreachable from one,
public reflectors are not affected.

Linux: writes ~/.config/systemd/user/macake-monitor.service, then enables
and starts it in your systemd ('systemctl --user'); its log is in your
journal. Without a systemd of yours (an ssh session without one) the unit
is installed and the note says how to start it. Unprivileged ICMP needs
your group inside net.ipv4.ping_group_range.

Exit status: 0 success (installed, or nothing to do); 1 a step failed; 64
usage, including running it as root (it installs for the user who runs
it); 69 no service manager (except --dry-run and --systemd-unit).`,
}

var uninstallAgentCmd = &command{
	name:  "uninstall-agent",
	args:  "[--dry-run] [--json]",
	short: "Stop and remove the user service of `macake monitor`.",
	long: `Stops the agent and removes its file (a LaunchAgent on macOS, a systemd user
unit on Linux). Logs are kept.

Exit status: 0 success (removed, or not installed); 1 a step failed; 64
usage, including running it as root; 69 no service manager (except
--dry-run).`,
}

func init() {
	installDaemonCmd.run = func(e *env, args []string) int { return runInstallService(e, installDaemonCmd, args, false) }
	installAgentCmd.run = func(e *env, args []string) int { return runInstallService(e, installAgentCmd, args, true) }
	uninstallDaemonCmd.run = func(e *env, args []string) int { return runUninstallService(e, uninstallDaemonCmd, args, false) }
	uninstallAgentCmd.run = func(e *env, args []string) int { return runUninstallService(e, uninstallAgentCmd, args, true) }
}

// serviceHost is the outside world of the service commands; tests
// replace it to run them against fakes of a Mac or of a Linux machine.
var serviceHost = func(*env) service.Host {
	return service.Host{GOOS: runtime.GOOS, Files: service.OSFiles{}, Runner: execrun.Exec{}, Executable: os.Executable}
}

// printReport prints the --json document of the four commands.
func printReport(e *env, r *service.Report) {
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Fprintln(e.stdout, string(out))
}

// serviceProgress prints what the library reports as it goes, on stderr.
func serviceProgress(e *env) service.Progress {
	return service.Progress{
		Warning: func(msg string) { fmt.Fprintf(e.stderr, "warning: %s\n", msg) },
		Note:    func(msg string) { fmt.Fprintf(e.stderr, "note: %s\n", msg) },
		Done:    func(s service.Step) { fmt.Fprintln(e.stderr, service.StepLine(s, false)) },
	}
}

// serviceFailed prints err and returns its exit status: a request that
// cannot work is a usage error, a machine without a service manager
// unavailable, anything else a failure.
func serviceFailed(e *env, c *command, err error) int {
	fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
	switch {
	case errors.As(err, new(*service.RequestError)):
		return exitcode.Usage
	case errors.As(err, new(*service.UnavailableError)):
		return exitcode.Unavailable
	}
	return exitcode.Failure
}

// serviceManager returns the manager of this machine, or prints why
// there is none and returns the exit status.
func serviceManager(e *env, c *command, h service.Host) (service.Manager, int) {
	m, err := service.For(h)
	if err != nil {
		return nil, serviceFailed(e, c, err)
	}
	return m, exitcode.OK
}

// installableService returns this machine's service manager when it has
// one to install into.
func installableService(e *env) (service.Manager, error) {
	m, err := service.For(serviceHost(e))
	if err == nil {
		err = m.Available()
	}
	return m, err
}

func runInstallService(e *env, c *command, args []string, agent bool) int {
	flags := c.flags()
	binary := flags.String("binary", "", "`PATH` of the macake binary the job runs (default: this executable)")
	dryRun := flags.Bool("dry-run", false, "print the service file and the steps; change nothing")
	restart := flags.Bool("restart", false, "restart the job even when nothing changed")
	asJSON := flags.Bool("json", false, "print the result as JSON")
	systemdUnit := flags.Bool("systemd-unit", false, "print the systemd unit (for this machine or another) and exit")
	if done, code := c.parseNoArgs(e, flags, args); done {
		return code
	}
	if agent && e.euid() == 0 && !*systemdUnit {
		fmt.Fprintf(e.stderr, "macake %s: run this as the user who should own the agent, without sudo; as root it would install into root's home.\n", c.name)
		return exitcode.Usage
	}
	h := serviceHost(e)
	progress := serviceProgress(e)
	prog, warnings, err := service.ResolveProgram(h, service.ProgramRequest{
		Binary: *binary, ConfigDir: e.configDir, StateDir: e.stateDir, Agent: agent, Lenient: *dryRun || *systemdUnit,
	}, progress)
	if err != nil {
		return serviceFailed(e, c, err)
	}
	if *systemdUnit {
		render := systemd.WatchUnit
		if agent {
			render = systemd.MonitorUnit
		}
		unit, err := render(prog)
		if err != nil {
			fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
			return exitcode.Usage
		}
		e.stdout.Write(unit)
		return exitcode.OK
	}
	m, code := serviceManager(e, c, h)
	if m == nil {
		return code
	}
	if !agent && !*dryRun {
		if ok, code := e.requireRootTo(c.name, "install the system service"); !ok {
			return code
		}
	}
	req := service.InstallRequest{Program: prog, Warnings: warnings, Agent: agent, UID: e.euid(), DryRun: *dryRun, Restart: *restart}
	if agent {
		if req.Home, code = e.home(c.name); code != exitcode.OK {
			return code
		}
	}
	rep, err := m.Install(e.ctx, req, progress)
	if err != nil {
		code := serviceFailed(e, c, err)
		if *asJSON && rep != nil {
			printReport(e, rep)
		}
		return code
	}
	if *asJSON {
		printReport(e, rep)
		return exitcode.OK
	}
	rep.WriteInstall(e.stdout, c.name)
	return exitcode.OK
}

func runUninstallService(e *env, c *command, args []string, agent bool) int {
	flags := c.flags()
	dryRun := flags.Bool("dry-run", false, "print the steps; change nothing")
	asJSON := flags.Bool("json", false, "print the result as JSON")
	if done, code := c.parseNoArgs(e, flags, args); done {
		return code
	}
	if agent && e.euid() == 0 {
		fmt.Fprintf(e.stderr, "macake %s: run this as the user who owns the agent, without sudo.\n", c.name)
		return exitcode.Usage
	}
	m, code := serviceManager(e, c, serviceHost(e))
	if m == nil {
		return code
	}
	if !agent && !*dryRun {
		if ok, code := e.requireRootTo(c.name, "remove the system service"); !ok {
			return code
		}
	}
	req := service.UninstallRequest{Agent: agent, UID: e.euid(), DryRun: *dryRun, Down: func() int {
		down := *e
		if *asJSON {
			down.stdout = e.stderr // stdout is the report's
		}
		return downCmd.run(&down, nil)
	}}
	if agent {
		if req.Home, code = e.home(c.name); code != exitcode.OK {
			return code
		}
	}
	progress := serviceProgress(e)
	progress.Applied = func(rep *service.Report) { fmt.Fprintln(e.stderr, rep.Uninstalled()) }
	rep, err := m.Uninstall(e.ctx, req, progress)
	if rep == nil {
		return serviceFailed(e, c, err)
	}
	if *dryRun && !*asJSON {
		rep.WriteUninstallPlan(e.stdout)
		return exitcode.OK
	}
	code = exitcode.OK
	var downErr *service.DownError
	switch {
	case errors.As(err, &downErr):
		fmt.Fprintf(e.stderr, "macake %s: %s\n", c.name, rep.DownFailed(downErr.ExitCode))
		code = exitcode.Failure
	case err != nil:
		code = serviceFailed(e, c, err)
		if !agent {
			fmt.Fprintln(e.stderr, "macake down was not run, since the daemon may still be running.")
		}
	}
	if *asJSON {
		printReport(e, rep)
	}
	return code
}

func (e *env) home(name string) (string, int) {
	home := e.getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		fmt.Fprintf(e.stderr, "macake %s: HOME is %q; it must be your absolute home directory\n", name, home)
		return "", exitcode.Usage
	}
	return filepath.Clean(home), exitcode.OK
}
