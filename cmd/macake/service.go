// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"os"
	"runtime"

	"github.com/macake/macake/cmd/macake/internal/servicerun"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/service"
	_ "github.com/macake/macake/service/launchd" // registers launchd, the manager of macOS
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

// services is what a run of the service commands (servicerun) touches
// of this command line's world.
func (e *env) services(c *command) servicerun.Env {
	return servicerun.Env{
		Ctx: e.ctx, Stdout: e.stdout, Stderr: e.stderr, EUID: e.euid(), Home: e.getenv("HOME"),
		ConfigDir: e.configDir, StateDir: e.stateDir, Host: serviceHost(e),
		RequireRoot: func(what string) (bool, int) { return e.requireRootTo(c.name, what) },
		Down: func(stdout io.Writer) int {
			down := *e
			down.stdout = stdout
			return downCmd.run(&down, nil)
		},
	}
}

func runInstallService(e *env, c *command, args []string, agent bool) int {
	flags := c.flags()
	var f servicerun.InstallFlags
	flags.StringVar(&f.Binary, "binary", "", "`PATH` of the macake binary the job runs (default: this executable)")
	flags.BoolVar(&f.DryRun, "dry-run", false, "print the service file and the steps; change nothing")
	flags.BoolVar(&f.Restart, "restart", false, "restart the job even when nothing changed")
	flags.BoolVar(&f.JSON, "json", false, "print the result as JSON")
	flags.BoolVar(&f.SystemdUnit, "systemd-unit", false, "print the systemd unit (for this machine or another) and exit")
	if done, code := c.parseNoArgs(e, flags, args); done {
		return code
	}
	return servicerun.Install(e.services(c), c.name, agent, f)
}

func runUninstallService(e *env, c *command, args []string, agent bool) int {
	flags := c.flags()
	dryRun := flags.Bool("dry-run", false, "print the steps; change nothing")
	asJSON := flags.Bool("json", false, "print the result as JSON")
	if done, code := c.parseNoArgs(e, flags, args); done {
		return code
	}
	return servicerun.Uninstall(e.services(c), c.name, agent, *dryRun, *asJSON)
}
