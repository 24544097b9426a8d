// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/launchd"
)

var installDaemonCmd = &command{
	name:  "install-daemon",
	args:  "[--binary PATH] [--dry-run] [--restart] [--json] [--systemd-unit]",
	short: "Install and start the launchd LaunchDaemon that runs `macake watch`.",
	long: `Writes /Library/LaunchDaemons/org.macake.watch.plist (root:wheel 0644), creates
/var/log/macake and loads the job with 'launchctl bootstrap system'. launchd then
runs 'macake watch' now and at every boot, restarts it if it fails, and sends its
log to /var/log/macake/watch.log. The job runs this binary (or --binary) with the
--config-dir and --state-dir given to this command.

Idempotent: when the same plist is already installed and loaded there is nothing
to do; a changed plist is booted out and bootstrapped again. Needs root, except
with --dry-run, which prints the plist and the steps without changing anything.
On Linux, --systemd-unit prints the equivalent systemd unit.

Exit status: 0 success (installed, or nothing to do); 1 a step failed (the
report says which); 64 usage (e.g. a --binary that is no macake); 69 not on
macOS (except --dry-run and --systemd-unit); 77 not root (except --dry-run).`,
}

var uninstallDaemonCmd = &command{
	name:  "uninstall-daemon",
	args:  "[--dry-run] [--json]",
	short: "Stop and remove the LaunchDaemon, then run `macake down`.",
	long: `Boots the job out of launchd (which stops 'macake watch'), removes its plist, then
runs 'macake down' to remove the shaping that watch left in place. The log
directory /var/log/macake is kept. Needs root, except with --dry-run.

Exit status: 0 success (removed, or not installed); 1 a step failed, or
'macake down' failed afterwards (run 'sudo macake down'); 64 usage; 69 not
on macOS (except --dry-run); 77 not root (except --dry-run).`,
}

var installAgentCmd = &command{
	name:  "install-agent",
	args:  "[--binary PATH] [--dry-run] [--restart] [--json] [--systemd-unit]",
	short: "Install a user LaunchAgent that runs `macake monitor`.",
	long: `Writes ~/Library/LaunchAgents/org.macake.monitor.plist and loads it into your
login session (launchctl bootstrap gui/UID): 'macake monitor' then runs from
login, with its log in ~/Library/Logs/macake/monitor.log. Run it as yourself,
without sudo. Without a GUI login (ssh only) the plist is installed and starts at
the next login. Note that macOS 15+ Local Network Privacy applies to agents: the
gateway may be unreachable from one, public reflectors are not affected.

Exit status: 0 success (installed, or nothing to do); 1 a step failed; 64
usage, including running it as root (it installs for the user who runs
it); 69 not on macOS (except --dry-run and --systemd-unit).`,
}

var uninstallAgentCmd = &command{
	name:  "uninstall-agent",
	args:  "[--dry-run] [--json]",
	short: "Remove the user LaunchAgent.",
	long: `Boots the agent out of your login session and removes its plist. Logs are kept.

Exit status: 0 success (removed, or not installed); 1 a step failed; 64
usage, including running it as root; 69 not on macOS (except --dry-run).`,
}

func init() {
	installDaemonCmd.run = func(e *env, args []string) int { return runInstallService(e, installDaemonCmd, args, false) }
	installAgentCmd.run = func(e *env, args []string) int { return runInstallService(e, installAgentCmd, args, true) }
	uninstallDaemonCmd.run = func(e *env, args []string) int { return runUninstallService(e, uninstallDaemonCmd, args, false) }
	uninstallAgentCmd.run = func(e *env, args []string) int { return runUninstallService(e, uninstallAgentCmd, args, true) }
}

// launchdHost is the outside world of the launchd commands; tests replace
// newLaunchdHost to run them on Linux against fakes.
type launchdHost struct {
	goos       string
	files      launchd.Files
	runner     execrun.Runner
	executable func() (string, error)
	sleep      func(time.Duration)
}

var newLaunchdHost = func() launchdHost {
	return launchdHost{goos: runtime.GOOS, files: launchd.OSFiles{}, runner: execrun.Exec{}, executable: os.Executable}
}

func (h launchdHost) host() launchd.Host {
	return launchd.Host{GOOS: h.goos, Files: h.files, Runner: h.runner, Executable: h.executable, Sleep: h.sleep}
}

// printReport prints the --json document of the four commands.
func printReport(e *env, r *launchd.Report) {
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Fprintln(e.stdout, string(out))
}

// serviceProgress prints what the library reports as it goes, on stderr.
func serviceProgress(e *env) launchd.Progress {
	return launchd.Progress{
		Warning: func(msg string) { fmt.Fprintf(e.stderr, "warning: %s\n", msg) },
		Note:    func(msg string) { fmt.Fprintf(e.stderr, "note: %s\n", msg) },
		Done:    func(s launchd.Step) { fmt.Fprintln(e.stderr, stepLine(s, "")) },
	}
}

// serviceFailed prints err and returns its exit status: a request that
// cannot work is a usage error, anything else a failure.
func serviceFailed(e *env, c *command, err error) int {
	fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
	var req *launchd.RequestError
	if errors.As(err, &req) {
		return exitUsage
	}
	return exitFailure
}

func runInstallService(e *env, c *command, args []string, agent bool) int {
	flags := c.flags()
	binary := flags.String("binary", "", "`PATH` of the macake binary the job runs (default: this executable)")
	dryRun := flags.Bool("dry-run", false, "print the plist and the steps; change nothing")
	restart := flags.Bool("restart", false, "restart the job even when nothing changed (launchctl kickstart -k)")
	asJSON := flags.Bool("json", false, "print the result as JSON")
	systemdUnit := flags.Bool("systemd-unit", false, "print the equivalent systemd unit (for Linux) and exit")
	if done, code := c.parse(e, flags, args); done {
		return code
	}
	if done, code := c.noArgs(e, flags); done {
		return code
	}
	if agent && e.euid() == 0 && !*systemdUnit {
		fmt.Fprintf(e.stderr, "macake %s: run this as the user who should own the agent, without sudo; as root it would install into root's home.\n", c.name)
		return exitUsage
	}
	h := newLaunchdHost()
	if h.goos != "darwin" && !*dryRun && !*systemdUnit {
		macOSOnly(e, c.name, agent, true)
		return exitUnavailable
	}
	progress := serviceProgress(e)
	prog, warnings, err := launchd.ResolveProgram(h.host(), launchd.ProgramRequest{
		Binary: *binary, ConfigDir: e.configDir, StateDir: e.stateDir, Agent: agent, Lenient: *dryRun || *systemdUnit,
	}, progress)
	if err != nil {
		return serviceFailed(e, c, err)
	}
	if *systemdUnit {
		render := launchd.SystemdWatchUnit
		if agent {
			render = launchd.SystemdMonitorUnit
		}
		unit, err := render(prog)
		if err != nil {
			fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
			return exitUsage
		}
		e.stdout.Write(unit)
		return exitOK
	}
	if !agent && !*dryRun {
		if ok, code := e.requireRoot(c.name); !ok {
			return code
		}
	}
	req := launchd.InstallRequest{Program: prog, Warnings: warnings, Agent: agent, UID: e.euid(), DryRun: *dryRun, Restart: *restart}
	if agent {
		var code int
		if req.Home, code = e.home(c.name); code != exitOK {
			return code
		}
	}
	rep, err := launchd.Install(e.ctx, h.host(), req, progress)
	if err != nil {
		code := serviceFailed(e, c, err)
		if *asJSON && rep != nil {
			printReport(e, rep)
		}
		return code
	}
	job := rep.Job
	if *asJSON {
		printReport(e, rep)
		return exitOK
	}
	if *dryRun {
		fmt.Fprintf(e.stdout, "# %s (%s)\n%s\n", job.PlistPath, ownerMode(job), job.Plist)
		printSteps(e, rep.Steps, "would ")
		if !rep.Changed {
			fmt.Fprintf(e.stdout, "Nothing to do: %s is installed and loaded with this exact plist.\n", job.Label)
		}
		return exitOK
	}
	sudo := "sudo "
	if agent {
		sudo = ""
	}
	switch {
	case !rep.Changed:
		fmt.Fprintf(e.stdout, "%s is installed and loaded with this exact plist; nothing to do.\n", job.Label)
		fmt.Fprintf(e.stdout, "To restart it: %smacake %s --restart\n", sudo, c.name)
	case rep.Observed.NoDomain:
		fmt.Fprintf(e.stdout, "Installed %s; it starts at your next login.\n", job.PlistPath)
	default:
		when := "at every boot"
		if agent {
			when = "at every login"
		}
		fmt.Fprintf(e.stdout, "Installed %s: launchd runs `macake %s` now and %s.\n", job.Label, jobCommand(agent), when)
	}
	fmt.Fprintf(e.stdout, "Logs:   %s\n", job.LogPath)
	if !agent {
		fmt.Fprintln(e.stdout, "Status: sudo macake status")
	}
	fmt.Fprintf(e.stdout, "Job:    %slaunchctl print %s\n", sudo, job.ServiceTarget())
	return exitOK
}

func runUninstallService(e *env, c *command, args []string, agent bool) int {
	flags := c.flags()
	dryRun := flags.Bool("dry-run", false, "print the steps; change nothing")
	asJSON := flags.Bool("json", false, "print the result as JSON")
	if done, code := c.parse(e, flags, args); done {
		return code
	}
	if done, code := c.noArgs(e, flags); done {
		return code
	}
	if agent && e.euid() == 0 {
		fmt.Fprintf(e.stderr, "macake %s: run this as the user who owns the agent, without sudo.\n", c.name)
		return exitUsage
	}
	h := newLaunchdHost()
	if h.goos != "darwin" && !*dryRun {
		macOSOnly(e, c.name, agent, false)
		return exitUnavailable
	}
	if !agent && !*dryRun {
		if ok, code := e.requireRoot(c.name); !ok {
			return code
		}
	}
	req := launchd.UninstallRequest{Agent: agent, UID: e.euid(), DryRun: *dryRun, Down: func() int {
		down := *e
		if *asJSON {
			down.stdout = e.stderr // stdout is the report's
		}
		return downCmd.run(&down, nil)
	}}
	if agent {
		var code int
		if req.Home, code = e.home(c.name); code != exitOK {
			return code
		}
	}
	progress := serviceProgress(e)
	progress.Applied = func(rep *launchd.Report) {
		if !rep.Changed {
			fmt.Fprintf(e.stderr, "%s is not installed; nothing to remove.\n", rep.Label)
		} else {
			fmt.Fprintf(e.stderr, "Uninstalled %s; logs kept in %s.\n", rep.Label, rep.Job.LogDir)
		}
	}
	rep, err := launchd.Uninstall(e.ctx, h.host(), req, progress)
	if rep == nil {
		return serviceFailed(e, c, err)
	}
	if *dryRun && !*asJSON {
		printSteps(e, rep.Steps, "would ")
		if !rep.Changed {
			fmt.Fprintf(e.stdout, "%s is not installed; nothing to remove.\n", rep.Label)
		}
		if !agent {
			fmt.Fprintln(e.stdout, "would run: macake down")
		}
		return exitOK
	}
	code := exitOK
	var downErr *launchd.DownError
	switch {
	case errors.As(err, &downErr):
		fmt.Fprintf(e.stderr, "macake %s: the LaunchDaemon is removed, but `macake down` failed (exit %d), so shaping may still be in place. Run `sudo macake down` to remove it.\n", c.name, downErr.ExitCode)
		code = exitFailure
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

// jobCommand is the macake command a job runs.
func jobCommand(agent bool) string {
	if agent {
		return "monitor"
	}
	return "watch"
}

func (e *env) home(name string) (string, int) {
	home := e.getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		fmt.Fprintf(e.stderr, "macake %s: HOME is %q; it must be your absolute home directory\n", name, home)
		return "", exitUsage
	}
	return filepath.Clean(home), exitOK
}

func ownerMode(j launchd.Job) string {
	mode := fmt.Sprintf("%04o", j.Mode)
	if j.Owner.Name != "" {
		return j.Owner.Name + " " + mode
	}
	return mode
}

func printSteps(e *env, steps []launchd.Step, prefix string) {
	for _, s := range steps {
		fmt.Fprintln(e.stdout, stepLine(s, prefix))
	}
}

// stepLine renders s for a dry run (prefix "would ") or after the fact ("").
func stepLine(s launchd.Step, prefix string) string {
	past := map[launchd.StepKind]string{launchd.StepMkdir: "created", launchd.StepWrite: "wrote", launchd.StepRemove: "removed", launchd.StepLaunchctl: "ran:"}
	future := map[launchd.StepKind]string{launchd.StepMkdir: "create", launchd.StepWrite: "write", launchd.StepRemove: "remove", launchd.StepLaunchctl: "run:"}
	verb := past[s.Kind]
	if prefix != "" {
		verb = prefix + future[s.Kind]
	}
	line := verb + " " + s.Object()
	if s.Reason != "" {
		line += "  # " + s.Reason
	}
	return line
}

func macOSOnly(e *env, name string, agent, install bool) {
	fmt.Fprintf(e.stderr, "macake %s: launchd is macOS-only.", name)
	switch {
	case !agent && install:
		fmt.Fprint(e.stderr, ` On Linux, run 'macake watch' under systemd:
  macake install-daemon --systemd-unit | sudo tee /etc/systemd/system/macake-watch.service
  sudo systemctl daemon-reload && sudo systemctl enable --now macake-watch
`)
	case !agent:
		fmt.Fprint(e.stderr, ` On Linux, remove the systemd unit instead:
  sudo systemctl disable --now macake-watch && sudo rm /etc/systemd/system/macake-watch.service
  sudo macake down
`)
	case install:
		fmt.Fprint(e.stderr, ` On Linux, run 'macake monitor' as a systemd user service:
  mkdir -p ~/.config/systemd/user
  macake install-agent --systemd-unit > ~/.config/systemd/user/macake-monitor.service
  systemctl --user daemon-reload && systemctl --user enable --now macake-monitor
`)
	default:
		fmt.Fprint(e.stderr, ` On Linux, remove the systemd user unit instead:
  systemctl --user disable --now macake-monitor && rm ~/.config/systemd/user/macake-monitor.service
`)
	}
}
