// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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
On Linux, --systemd-unit prints the equivalent systemd unit.`,
}

var uninstallDaemonCmd = &command{
	name:  "uninstall-daemon",
	args:  "[--dry-run] [--json]",
	short: "Stop and remove the LaunchDaemon, then run `macake down`.",
	long: `Boots the job out of launchd (which stops 'macake watch'), removes its plist, then
runs 'macake down' to remove the shaping that watch left in place. The log
directory /var/log/macake is kept. Needs root, except with --dry-run.`,
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
gateway may be unreachable from one, public reflectors are not affected.`,
}

var uninstallAgentCmd = &command{
	name:  "uninstall-agent",
	args:  "[--dry-run] [--json]",
	short: "Remove the user LaunchAgent.",
	long:  `Boots the agent out of your login session and removes its plist. Logs are kept.`,
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

func (h launchdHost) installer() *launchd.Installer {
	return &launchd.Installer{Files: h.files, Runner: h.runner, Sleep: h.sleep}
}

// serviceReport is the --json document of the four commands.
type serviceReport struct {
	FormatVersion    string               `json:"format_version"`
	DryRun           bool                 `json:"dry_run"`
	Label            string               `json:"label"`
	ServiceTarget    string               `json:"service_target"`
	PlistPath        string               `json:"plist_path"`
	LogPath          string               `json:"log_path"`
	ProgramArguments []string             `json:"program_arguments,omitempty"`
	Observed         *launchd.Observation `json:"observed,omitempty"`
	Changed          bool                 `json:"changed"`
	Steps            []launchd.Step       `json:"steps"`
	Notes            []string             `json:"notes,omitempty"`
	Warnings         []string             `json:"warnings,omitempty"`
	Plist            string               `json:"plist,omitempty"`
	DownExitCode     *int                 `json:"down_exit_code,omitempty"`
	Error            string               `json:"error,omitempty"`
}

func (r *serviceReport) print(e *env) {
	if r.Steps == nil {
		r.Steps = []launchd.Step{}
	}
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Fprintln(e.stdout, string(out))
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
	prog, warnings, code := e.serviceProgram(h, c, *binary, *dryRun || *systemdUnit, agent)
	if code != exitOK {
		return code
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
	var job launchd.Job
	var err error
	var home string
	if agent {
		var herr int
		if home, herr = e.home(c.name); herr != exitOK {
			return herr
		}
		job, err = launchd.AgentJob(prog, home, e.euid())
	} else {
		job, err = launchd.DaemonJob(prog)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
		return exitUsage
	}
	rep := &serviceReport{FormatVersion: "1.0", DryRun: *dryRun, Label: job.Label, ServiceTarget: job.ServiceTarget(),
		PlistPath: job.PlistPath, LogPath: job.LogPath, ProgramArguments: launchd.DaemonArgs(prog),
		Warnings: warnings}
	if agent {
		rep.ProgramArguments = launchd.AgentArgs(prog, home)
	}
	obs, code := e.observe(h, c, job, *dryRun, rep, launchd.Fresh(job), "that does not have the job yet")
	if code != exitOK {
		return code
	}
	rep.Observed = &obs
	steps := launchd.PlanInstall(job, obs, *restart)
	rep.Steps, rep.Changed = steps, len(steps) > 0
	if *dryRun {
		rep.Plist = string(job.Plist)
		if *asJSON {
			rep.print(e)
			return exitOK
		}
		fmt.Fprintf(e.stdout, "# %s (%s)\n%s\n", job.PlistPath, ownerMode(job), job.Plist)
		printSteps(e, steps, "would ")
		if len(steps) == 0 {
			fmt.Fprintf(e.stdout, "Nothing to do: %s is installed and loaded with this exact plist.\n", job.Label)
		}
		return exitOK
	}
	outcome, err := h.installer().Apply(e.ctx, job, steps, progress(e))
	rep.Notes = outcome.Notes
	for _, n := range outcome.Notes {
		fmt.Fprintf(e.stderr, "note: %s\n", n)
	}
	if err != nil {
		rep.Error = err.Error()
		fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
		if *asJSON {
			rep.print(e)
		}
		return exitFailure
	}
	if *asJSON {
		rep.print(e)
		return exitOK
	}
	sudo := "sudo "
	if agent {
		sudo = ""
	}
	switch {
	case len(steps) == 0:
		fmt.Fprintf(e.stdout, "%s is installed and loaded with this exact plist; nothing to do.\n", job.Label)
		fmt.Fprintf(e.stdout, "To restart it: %smacake %s --restart\n", sudo, c.name)
	case obs.NoDomain:
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
	job := launchd.Daemon()
	if agent {
		home, code := e.home(c.name)
		if code != exitOK {
			return code
		}
		job = launchd.Agent(home, e.euid())
	}
	rep := &serviceReport{FormatVersion: "1.0", DryRun: *dryRun, Label: job.Label, ServiceTarget: job.ServiceTarget(),
		PlistPath: job.PlistPath, LogPath: job.LogPath}
	installed := launchd.Observation{Plist: launchd.PlistDifferent, Loaded: true}
	obs, code := e.observe(h, c, job, *dryRun, rep, installed, "that has the job installed and loaded")
	if code != exitOK {
		return code
	}
	rep.Observed = &obs
	steps := launchd.PlanUninstall(job, obs)
	rep.Steps, rep.Changed = steps, len(steps) > 0
	if *dryRun {
		if *asJSON {
			rep.print(e)
			return exitOK
		}
		printSteps(e, steps, "would ")
		if len(steps) == 0 {
			fmt.Fprintf(e.stdout, "%s is not installed; nothing to remove.\n", job.Label)
		}
		if !agent {
			fmt.Fprintln(e.stdout, "would run: macake down")
		}
		return exitOK
	}
	if _, err := h.installer().Apply(e.ctx, job, steps, progress(e)); err != nil {
		rep.Error = err.Error()
		fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
		if !agent {
			// watch may still be running and would re-apply what down removes.
			fmt.Fprintln(e.stderr, "macake down was not run, since the daemon may still be running.")
		}
		if *asJSON {
			rep.print(e)
		}
		return exitFailure
	}
	if len(steps) == 0 {
		fmt.Fprintf(e.stderr, "%s is not installed; nothing to remove.\n", job.Label)
	} else {
		fmt.Fprintf(e.stderr, "Uninstalled %s; logs kept in %s.\n", job.Label, job.LogDir)
	}
	status := exitOK
	if !agent {
		// The daemon leaves shaping in place when stopped (launchd would
		// restart it); uninstalling means the user wants it gone.
		down := *e
		if *asJSON {
			down.stdout = e.stderr
		}
		downCode := downCmd.run(&down, nil)
		rep.DownExitCode = &downCode
		if downCode != exitOK {
			rep.Error = fmt.Sprintf("macake down exited %d; shaping may still be in place", downCode)
			fmt.Fprintf(e.stderr, "macake %s: the LaunchDaemon is removed, but `macake down` failed (exit %d), so shaping may still be in place. Run `sudo macake down` to remove it.\n", c.name, downCode)
			status = exitFailure
		}
	}
	if *asJSON {
		rep.print(e)
	}
	return status
}

// serviceProgram resolves what the job runs: the binary (made absolute but
// not symlink-resolved: Homebrew's /opt/homebrew/bin/macake is a stable
// symlink into a versioned Cellar path that an upgrade deletes) and the
// absolute config and state directories. lenient turns a missing binary
// into a warning (dry runs, rendering a unit for another machine).
func (e *env) serviceProgram(h launchdHost, c *command, binary string, lenient, agent bool) (launchd.Program, []string, int) {
	var warnings []string
	warn := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		warnings = append(warnings, msg)
		fmt.Fprintf(e.stderr, "warning: %s\n", msg)
	}
	if binary == "" {
		exe, err := h.executable()
		if err != nil {
			fmt.Fprintf(e.stderr, "macake %s: cannot tell where this program is (%v); pass --binary PATH\n", c.name, err)
			return launchd.Program{}, nil, exitFailure
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
	prog := launchd.Program{Binary: abs(binary), ConfigDir: abs(e.configDir), StateDir: abs(e.stateDir)}
	if err := prog.Validate(); err != nil {
		fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
		return prog, nil, exitUsage
	}
	fi, err := h.files.Stat(prog.Binary)
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
		if !lenient {
			fmt.Fprintf(e.stderr, "macake %s: --binary %s: %s; pass the path of an installed macake\n", c.name, prog.Binary, problem)
			return prog, nil, exitUsage
		}
		warn("%s: %s", prog.Binary, problem)
	}
	if !agent && err == nil {
		// A root daemon running a file its user can replace hands root to
		// anything running as that user.
		if dfi, derr := h.files.Stat(filepath.Dir(prog.Binary)); derr == nil {
			for _, f := range []struct {
				path string
				fi   launchd.FileInfo
			}{{prog.Binary, fi}, {filepath.Dir(prog.Binary), dfi}} {
				if f.fi.UID > 0 || f.fi.Mode.Perm()&0o022 != 0 {
					warn("%s is writable by someone other than root (owner uid %d, mode %04o): whoever can change it can replace what launchd runs as root; "+
						"install a copy where only root can write (sudo make install PREFIX=/opt/macake) and pass --binary /opt/macake/bin/macake", f.path, f.fi.UID, f.fi.Mode.Perm())
					break
				}
			}
		}
	}
	if !agent {
		if _, err := h.files.Stat(prog.ConfigDir); errors.Is(err, fs.ErrNotExist) {
			warn("%s does not exist yet: watch shapes nothing until a policy file is there", prog.ConfigDir)
		}
	}
	return prog, warnings, exitOK
}

// observe reads the machine's state for job. Off macOS there is nothing to
// ask, so a dry run shows the fallback situation (described by the phrase
// "on a Mac …"). A dry run that cannot observe (e.g. launchctl refusing a
// non-root print) falls back to it too; a real run stops.
func (e *env) observe(h launchdHost, c *command, job launchd.Job, dryRun bool, rep *serviceReport, fallback launchd.Observation, situation string) (launchd.Observation, int) {
	if h.goos != "darwin" {
		note := "launchd is macOS-only; this is what the command does on a Mac " + situation
		rep.Notes = append(rep.Notes, note)
		fmt.Fprintf(e.stderr, "note: %s\n", note)
		return fallback, exitOK
	}
	obs, err := h.installer().Observe(e.ctx, job)
	if err == nil {
		return obs, exitOK
	}
	if dryRun {
		msg := fmt.Sprintf("cannot read the current state (%v); showing the steps on a Mac %s", err, situation)
		rep.Warnings = append(rep.Warnings, msg)
		fmt.Fprintf(e.stderr, "warning: %s\n", msg)
		return fallback, exitOK
	}
	fmt.Fprintf(e.stderr, "macake %s: %v\n", c.name, err)
	return obs, exitFailure
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

// progress reports each completed step on stderr, in the past tense.
func progress(e *env) func(launchd.Step) {
	return func(s launchd.Step) { fmt.Fprintln(e.stderr, stepLine(s, "")) }
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
