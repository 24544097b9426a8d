// SPDX-License-Identifier: Apache-2.0

// Package launchd is the macOS backend of package service: it renders
// the LaunchDaemon plist for `macake watch` and the user LaunchAgent plist
// for `macake monitor`, and installs or removes them with launchctl,
// idempotently. It registers itself as the manager of darwin.
package launchd

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/macake/macake/service"
)

// Labels are reverse-DNS names under the project's domain; the plist file
// is named after its label, as launchd expects.
const (
	// DaemonLabel is the launchd label of the LaunchDaemon running `macake watch`.
	DaemonLabel = "org.macake.watch"
	// AgentLabel is the launchd label of the user LaunchAgent running `macake monitor`.
	AgentLabel = "org.macake.monitor"
)

// Fixed system locations of the daemon.
const (
	// DaemonPlistPath is where launchd loads system daemons from at boot.
	DaemonPlistPath = "/Library/LaunchDaemons/" + DaemonLabel + ".plist"
	// DaemonLogDir holds the daemon's log; created root:wheel 0755 at install.
	DaemonLogDir = "/var/log/macake"
	// DaemonLogPath is the daemon's log: watch writes it itself (it gets
	// --log-file), rotating it at 10 MiB and keeping 5 old files, so it
	// never grows without bound (launchd never rotates what it writes).
	DaemonLogPath = DaemonLogDir + "/watch.log"
	// DaemonStderrPath receives what the daemon writes to stdout and
	// stderr through launchd: only what comes before its logger starts
	// (e.g. an invalid macake.toml) and crash reports, which watch also
	// copies into DaemonLogPath. watch truncates it at start when it has
	// grown past 1 MiB.
	DaemonStderrPath = DaemonLogDir + "/watch.stderr.log"
	// Launchctl is launchctl's path on every macOS release.
	Launchctl = "/bin/launchctl"
)

// ProcessType Standard: Background would throttle CPU and timers, which
// distorts an RTT sampler; Interactive is unverified on current macOS.
const ProcessType = "Standard"

// checkPaths checks that p's paths are what a plist can carry: XML text.
func checkPaths(p service.Program) error {
	if err := p.Validate(); err != nil {
		return err
	}
	for _, f := range []struct{ flag, path string }{{"--binary", p.Binary}, {"--config-dir", p.ConfigDir}, {"--state-dir", p.StateDir}} {
		if _, err := escapeText(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	return nil
}

// DaemonArgs returns the LaunchDaemon's argv: `watch` writing its own
// rotating log to DaemonLogPath (unless macake.toml sets log_file).
func DaemonArgs(p service.Program) []string {
	return append(p.Args("watch"), "--log-file", DaemonLogPath)
}

// keepAlive is the KeepAlive policy of both jobs: restart after a failure or
// a crash, not after a clean exit.
//
// launchd cannot key a restart on particular exit codes: KeepAlive is either
// a bool or a dictionary of conditions (SuccessfulExit, Crashed, PathState,
// NetworkState, OtherJobEnabled, AfterInitialDemand), none of which names a
// status. So "do not restart on 78 (config invalid) or 77 (needs root)" is
// not expressible. SuccessfulExit=false is the closest: a deliberate exit 0
// (SIGTERM from bootout, --teardown-on-exit) stays down, and everything else
// comes back. A 78 is then retried every ThrottleInterval, which also means
// a fixed policy file is picked up without a manual restart; 77 cannot occur
// in the system domain, where the job runs as root. (systemd can express the
// rule exactly: see systemd.WatchUnit's RestartPreventExitStatus.)
var keepAlive = Dict{{"SuccessfulExit", Bool(false)}}

func stringArray(args []string) Array {
	arr := make(Array, len(args))
	for i, a := range args {
		arr[i] = String(a)
	}
	return arr
}

// DaemonPlist renders /Library/LaunchDaemons/org.macake.watch.plist: `macake
// watch` as root, started at boot (RunAtLoad), restarted on failure
// (KeepAlive, see keepAlive), at most once per ThrottleInterval, logging to
// DaemonLogPath itself, with launchd's stdout and stderr in
// DaemonStderrPath. ExitTimeOut is left at launchd's default on purpose: watch
// finishes its shutdown in well under a second, and a custom value has been
// reported to suppress SIGTERM at reboot.
func DaemonPlist(p service.Program) ([]byte, error) {
	if err := checkPaths(p); err != nil {
		return nil, err
	}
	return Encode(Dict{
		{"Label", String(DaemonLabel)},
		{"ProgramArguments", stringArray(DaemonArgs(p))},
		{"RunAtLoad", Bool(true)},
		{"KeepAlive", keepAlive},
		{"ThrottleInterval", Integer(service.ThrottleInterval)},
		{"ProcessType", String(ProcessType)},
		{"StandardOutPath", String(DaemonStderrPath)},
		{"StandardErrorPath", String(DaemonStderrPath)},
	})
}

// AgentPlistPath is the user LaunchAgent's plist inside home.
func AgentPlistPath(home string) string {
	return filepath.Join(home, "Library", "LaunchAgents", AgentLabel+".plist")
}

// AgentLogDir is where the user LaunchAgent logs, inside home.
func AgentLogDir(home string) string { return filepath.Join(home, "Library", "Logs", "macake") }

// AgentLogPath is the agent's log: monitor writes its lines there itself
// (it gets --log-file) and rotates it as watch does its log, so a line a
// second (about 10 MB a day) never grows without bound; launchd never
// rotates what it writes.
func AgentLogPath(home string) string { return filepath.Join(AgentLogDir(home), "monitor.log") }

// AgentStderrPath receives the agent's stdout and stderr through launchd:
// its start-up line, errors, and crash reports.
func AgentStderrPath(home string) string {
	return filepath.Join(AgentLogDir(home), "monitor.stderr.log")
}

// AgentArgs returns the LaunchAgent's argv: `monitor` writing its own
// rotating log to AgentLogPath(home).
func AgentArgs(p service.Program, home string) []string {
	return append(p.Args("monitor"), "--log-file", AgentLogPath(home))
}

// AgentPlist renders ~/Library/LaunchAgents/org.macake.monitor.plist: `macake
// monitor` as the user, from login, with the same restart policy as the
// daemon, writing its own rotating log under ~/Library/Logs/macake (launchd's
// stdout and stderr go to AgentStderrPath). home must be absolute: launchd
// does not expand ~ in plists.
func AgentPlist(p service.Program, home string) ([]byte, error) {
	if err := checkPaths(p); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(home) {
		return nil, fmt.Errorf("home directory %q is not absolute", home)
	}
	return Encode(Dict{
		{"Label", String(AgentLabel)},
		{"ProgramArguments", stringArray(AgentArgs(p, home))},
		{"RunAtLoad", Bool(true)},
		{"KeepAlive", keepAlive},
		{"ThrottleInterval", Integer(service.ThrottleInterval)},
		{"ProcessType", String(ProcessType)},
		{"StandardOutPath", String(AgentStderrPath(home))},
		{"StandardErrorPath", String(AgentStderrPath(home))},
	})
}

// Job is one launchd service: where its plist lives, in which domain it
// runs, and what the plist says.
type Job struct {
	Label string
	// Domain is the launchctl domain target: "system" or "gui/<uid>".
	Domain string
	// PlistPath is the plist's absolute path.
	PlistPath string
	// Plist is the rendered plist; nil when only removing the job.
	Plist []byte
	// Owner and Mode of the plist file and of the directories created for it.
	Owner service.Owner
	Mode  fs.FileMode
	// LogDir is created at install so launchd can open the log file.
	LogDir string
	// LogPath is the log to read: the daemon's (DaemonLogPath) or the
	// agent's (AgentLogPath), each written and rotated by the job itself.
	LogPath string
}

// ServiceTarget is the launchctl service target, e.g. "system/org.macake.watch".
func (j Job) ServiceTarget() string { return j.Domain + "/" + j.Label }

// IsGUI reports whether j runs in a user's login (gui/<uid>) domain.
func (j Job) IsGUI() bool { return strings.HasPrefix(j.Domain, "gui/") }

// Daemon returns the LaunchDaemon job without its plist (enough to remove it).
func Daemon() Job {
	return Job{
		Label: DaemonLabel, Domain: "system", PlistPath: DaemonPlistPath,
		Owner: service.RootWheel, Mode: 0o644, LogDir: DaemonLogDir, LogPath: DaemonLogPath,
	}
}

// DaemonJob returns the LaunchDaemon job running p.
func DaemonJob(p service.Program) (Job, error) {
	j := Daemon()
	var err error
	j.Plist, err = DaemonPlist(p)
	return j, err
}

// Agent returns the user LaunchAgent job of the user uid with home
// directory home, without its plist.
func Agent(home string, uid int) Job {
	return Job{
		Label: AgentLabel, Domain: "gui/" + strconv.Itoa(uid), PlistPath: AgentPlistPath(home),
		Owner: service.CurrentUser, Mode: 0o644, LogDir: AgentLogDir(home), LogPath: AgentLogPath(home),
	}
}

// AgentJob returns the user LaunchAgent job running p.
func AgentJob(p service.Program, home string, uid int) (Job, error) {
	j := Agent(home, uid)
	var err error
	j.Plist, err = AgentPlist(p, home)
	return j, err
}
