// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/service"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/launchd/launchdtest"
	"github.com/macake/macake/service/servicetest"
	"github.com/macake/macake/service/systemd"
	"github.com/macake/macake/service/systemd/systemdtest"
)

// fakeMac replaces the service commands' outside world with an in-memory
// machine holding an installed, root-owned /usr/local/bin/macake and a
// config directory: a Mac with launchd (newFakeMac), or a Linux machine
// running systemd (newFakeLinux).
type fakeMac struct {
	goos    string
	files   *servicetest.Files
	launchd *launchdtest.Launchd
	systemd *systemdtest.Systemctl
	downs   int
}

func newFakeMac(t *testing.T) *fakeMac {
	t.Helper()
	m := &fakeMac{goos: "darwin", files: servicetest.NewFiles("/Library/LaunchDaemons", "/var/log", "/etc/macake/links.d", "/Users/you", "/home/me")}
	m.files.AddFile("/usr/local/bin/macake", []byte("binary"), 0o755, 0, 0)
	m.launchd = launchdtest.NewLaunchd(m.files)
	saved := serviceHost
	serviceHost = func(e *env) service.Host {
		var runner execrun.Runner = m.launchd
		if m.goos == "linux" {
			runner = m.systemd
		}
		return service.Host{GOOS: m.goos, Files: m.files, Runner: runner,
			Executable: func() (string, error) { return "/usr/local/bin/macake", nil },
			Sleep:      func(time.Duration) {}}
	}
	t.Cleanup(func() { serviceHost = saved })
	return m
}

// newFakeLinux is newFakeMac on Linux with systemd running, for the user
// whose home is /home/me.
func newFakeLinux(t *testing.T) *fakeMac {
	t.Helper()
	m := newFakeMac(t)
	m.goos = "linux"
	m.files.MkdirAll(systemd.BootedMarker, 0o755, service.RootRoot)
	m.files.MkdirAll("/etc/systemd/system", 0o755, service.RootRoot)
	m.systemd = systemdtest.New(m.files, "/home/me")
	return m
}

// stubDown replaces `macake down` for the test with one that exits code
// and prints msg, counting its calls.
func (m *fakeMac) stubDown(t *testing.T, code int, msg string) {
	saved := downCmd.run
	downCmd.run = func(e *env, args []string) int {
		m.downs++
		fmt.Fprintln(e.stderr, msg)
		return code
	}
	t.Cleanup(func() { downCmd.run = saved })
}

// runAs runs the CLI in-process as uid with HOME home.
func runAs(t *testing.T, uid int, home string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(k string) string {
			if k == "HOME" {
				return home
			}
			return ""
		},
		euid: func() int { return uid }}
	code := e.main(args)
	return code, out.String(), errb.String()
}

func (m *fakeMac) loadedArgs(t *testing.T, target string) []string {
	t.Helper()
	data, ok := m.launchd.Loaded[target]
	if !ok {
		t.Fatalf("%s is not loaded", target)
	}
	v, err := launchd.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range v.(launchd.Dict).Get("ProgramArguments").(launchd.Array) {
		args = append(args, string(a.(launchd.String)))
	}
	return args
}

func TestInstallDaemonCommand(t *testing.T) {
	m := newFakeMac(t)
	code, stdout, stderr := runAs(t, 0, "/var/root", "install-daemon")
	if code != exitcode.OK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	mustContain(t, "stdout", stdout, "Installed org.macake.watch", "Logs:   /var/log/macake/watch.log", "sudo launchctl print system/org.macake.watch")
	if !strings.Contains(stderr, "ran: /bin/launchctl bootstrap system /Library/LaunchDaemons/org.macake.watch.plist") {
		t.Errorf("stderr does not report the bootstrap:\n%s", stderr)
	}
	want := []string{"/usr/local/bin/macake", "--config-dir", "/etc/macake/links.d", "--state-dir", defaultStateDir, "watch", "--log-file", "/var/log/macake/watch.log"}
	if got := m.loadedArgs(t, "system/org.macake.watch"); !reflect.DeepEqual(got, want) {
		t.Errorf("launchd runs %q, want %q", got, want)
	}

	code, stdout, _ = runAs(t, 0, "/var/root", "install-daemon")
	if code != exitcode.OK || !strings.Contains(stdout, "nothing to do") {
		t.Errorf("second install: exit %d, stdout %q", code, stdout)
	}

	// Other directories and binary: the plist changes and is reloaded.
	m.files.AddFile("/opt/macake/bin/macake", []byte("binary"), 0o755, 0, 0)
	code, _, stderr = runAs(t, 0, "/var/root", "--config-dir", "/srv/links.d", "--state-dir", "/srv/state", "install-daemon", "--binary", "/opt/macake/bin/macake")
	if code != exitcode.OK || !strings.Contains(stderr, "ran: /bin/launchctl bootout system/org.macake.watch") {
		t.Fatalf("reinstall: exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stderr, "/srv/links.d does not exist yet") {
		t.Errorf("no warning about the missing config directory:\n%s", stderr)
	}
	want = []string{"/opt/macake/bin/macake", "--config-dir", "/srv/links.d", "--state-dir", "/srv/state", "watch", "--log-file", "/var/log/macake/watch.log"}
	if got := m.loadedArgs(t, "system/org.macake.watch"); !reflect.DeepEqual(got, want) {
		t.Errorf("after reinstall launchd runs %q, want %q", got, want)
	}
}

// TestServiceCommandsRefuseTheWrongUser: install-daemon needs root, the
// agent commands refuse root and a HOME that is no home; each says so
// before launchctl runs.
func TestServiceCommandsRefuseTheWrongUser(t *testing.T) {
	m := newFakeMac(t)
	for _, tc := range []struct {
		uid  int
		home string
		args []string
		code int
		hint string
	}{
		{501, "/Users/you", []string{"install-daemon"}, exitcode.NoPerm, "sudo"},
		{0, "/var/root", []string{"install-agent"}, exitcode.Usage, "without sudo"},
		{0, "/var/root", []string{"uninstall-agent"}, exitcode.Usage, "without sudo"},
		{0, "/var/root", []string{"install-agent", "--dry-run"}, exitcode.Usage, "without sudo"},
		{501, "", []string{"install-agent"}, exitcode.Usage, "HOME"},
	} {
		code, _, stderr := runAs(t, tc.uid, tc.home, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.hint) {
			t.Errorf("%v as uid %d (HOME %q): exit %d, stderr %q; want %d and %q", tc.args, tc.uid, tc.home, code, stderr, tc.code, tc.hint)
		}
	}
	if len(m.launchd.Calls) != 0 {
		t.Errorf("ran launchctl: %q", m.launchd.Calls)
	}
}

func TestInstallDaemonDryRun(t *testing.T) {
	m := newFakeMac(t)
	code, stdout, stderr := runAs(t, 501, "/Users/you", "install-daemon", "--dry-run")
	if code != exitcode.OK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	mustContain(t, "dry run", stdout,
		"# /Library/LaunchDaemons/org.macake.watch.plist (root:wheel 0644)",
		"<string>org.macake.watch</string>",
		"would create /var/log/macake (root:wheel 0755)",
		"would write /Library/LaunchDaemons/org.macake.watch.plist (root:wheel 0644)",
		"would run: /bin/launchctl enable system/org.macake.watch",
		"would run: /bin/launchctl bootstrap system /Library/LaunchDaemons/org.macake.watch.plist",
	)
	if len(m.launchd.Loaded) != 0 {
		t.Error("dry run loaded the job")
	}
	if _, err := m.files.Stat(launchd.DaemonPlistPath); !errors.Is(err, fs.ErrNotExist) {
		t.Error("dry run wrote the plist")
	}
	for _, c := range m.launchd.Calls {
		if !strings.Contains(c, " print ") {
			t.Errorf("dry run ran %q; only print is allowed", c)
		}
	}
}

func TestInstallDaemonDryRunJSON(t *testing.T) {
	newFakeMac(t)
	code, stdout, stderr := runAs(t, 0, "/var/root", "install-daemon", "--dry-run", "--json")
	if code != exitcode.OK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var rep struct {
		DryRun        bool   `json:"dry_run"`
		ServiceTarget string `json:"service_target"`
		Changed       bool   `json:"changed"`
		Content       string `json:"content"`
		Steps         []struct {
			Action string   `json:"action"`
			Argv   []string `json:"argv"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout)
	}
	if !rep.DryRun || !rep.Changed || rep.ServiceTarget != "system/org.macake.watch" || len(rep.Steps) != 4 {
		t.Errorf("report %+v", rep)
	}
	if _, err := launchd.Decode([]byte(rep.Content)); err != nil {
		t.Errorf("plist in JSON does not lint: %v", err)
	}
	if last := rep.Steps[len(rep.Steps)-1]; last.Action != "run" || last.Argv[1] != "bootstrap" {
		t.Errorf("last step %+v, want the bootstrap", last)
	}
}

func TestInstallDaemonBinaryChecks(t *testing.T) {
	m := newFakeMac(t)
	m.files.AddFile("/home/me/bin/macake", []byte("binary"), 0o755, 501, 20)
	m.files.AddFile("/usr/local/bin/notes.txt", []byte("text"), 0o644, 0, 0)
	for _, tc := range []struct {
		binary, want string
	}{
		{"/nonexistent/macake", "--binary /nonexistent/macake: no such file"},
		{"/usr/local/bin", "not an executable file"},
		{"/usr/local/bin/notes.txt", "not an executable file"},
		{"relative/macake", "no such file"}, // made absolute first, then checked
	} {
		code, _, stderr := runAs(t, 0, "/var/root", "install-daemon", "--binary", tc.binary)
		if code != exitcode.Usage || !strings.Contains(stderr, tc.want) {
			t.Errorf("--binary %s: exit %d, stderr %q; want 64 and %q", tc.binary, code, stderr, tc.want)
		}
	}
	if len(m.launchd.Loaded) != 0 {
		t.Fatal("a bad --binary was installed")
	}
	// A user-writable binary works but is called out: it hands root to that user.
	code, _, stderr := runAs(t, 0, "/var/root", "install-daemon", "--binary", "/home/me/bin/macake")
	if code != exitcode.OK || !strings.Contains(stderr, "writable by someone other than root") {
		t.Errorf("user-owned binary: exit %d, stderr %q", code, stderr)
	}
}

func TestInstallDaemonFailureReportsLaunchctl(t *testing.T) {
	m := newFakeMac(t)
	m.launchd.Fail("bootstrap", 5, "Bootstrap failed: 5: Input/output error", -1)
	code, _, stderr := runAs(t, 0, "/var/root", "install-daemon")
	if code != exitcode.Failure || !strings.Contains(stderr, "Input/output error") || !strings.Contains(stderr, "plutil -lint") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestServiceCommandsOnLinux: on Linux the four commands install, enable
// and start the systemd units (and stop and remove them), where they said
// "launchd is macOS-only" and exited 69 (issue 27, item 1).
func TestServiceCommandsOnLinux(t *testing.T) {
	m := newFakeLinux(t)
	m.stubDown(t, exitcode.OK, "removed everything")
	code, stdout, stderr := runAs(t, 0, "/root", "install-daemon")
	if code != exitcode.OK {
		t.Fatalf("install-daemon: exit %d, stderr %q", code, stderr)
	}
	mustContain(t, "install-daemon's stderr", stderr, "wrote /etc/systemd/system/macake-watch.service (root:root 0644)  # not installed",
		"ran: systemctl daemon-reload", "ran: systemctl enable macake-watch.service  # start it at every boot", "ran: systemctl start macake-watch.service  # start it now")
	mustContain(t, "install-daemon's stdout", stdout, "Installed macake-watch.service: systemd runs `macake watch` now and at every boot.",
		"Logs:   journalctl -u macake-watch.service -f", "Job:    systemctl status macake-watch.service")
	if !m.systemd.System.Active["macake-watch.service"] || !m.systemd.System.Enabled["macake-watch.service"] {
		t.Errorf("not enabled and running: %+v", m.systemd.System)
	}
	if code, stdout, _ := runAs(t, 0, "/root", "install-daemon"); code != exitcode.OK || !strings.Contains(stdout, "installed and running with this exact unit; nothing to do") {
		t.Errorf("second install: exit %d, %q", code, stdout)
	}
	code, _, stderr = runAs(t, 0, "/root", "uninstall-daemon")
	if code != exitcode.OK || m.downs != 1 {
		t.Fatalf("uninstall-daemon: exit %d, downs %d, stderr %q", code, m.downs, stderr)
	}
	mustContain(t, "uninstall-daemon's stderr", stderr, "ran: systemctl disable --now macake-watch.service", "removed /etc/systemd/system/macake-watch.service",
		"Uninstalled macake-watch.service; its log stays in the journal", "removed everything")

	m.files.UID, m.files.GID = 1000, 1000
	code, stdout, stderr = runAs(t, 1000, "/home/me", "install-agent")
	if code != exitcode.OK || !m.systemd.User.Active["macake-monitor.service"] {
		t.Fatalf("install-agent: exit %d, stderr %q", code, stderr)
	}
	mustContain(t, "install-agent", stdout+stderr, "ran: systemctl --user enable macake-monitor.service", "Installed macake-monitor.service: systemd runs `macake monitor` now and at every login.",
		"Logs:   journalctl --user -u macake-monitor.service -f")
	if strings.Contains(stdout, "sudo") {
		t.Errorf("the agent's output suggests sudo:\n%s", stdout)
	}
	if code, _, stderr := runAs(t, 1000, "/home/me", "uninstall-agent"); code != exitcode.OK || m.systemd.User.Active["macake-monitor.service"] {
		t.Errorf("uninstall-agent: exit %d, stderr %q", code, stderr)
	}
}

// TestServiceCommandsWithoutSystemd: a Linux machine whose init is not
// systemd gets exit 69 and what to do instead; a dry run still shows the
// steps, and --json says which manager it is for.
func TestServiceCommandsWithoutSystemd(t *testing.T) {
	m := newFakeLinux(t)
	m.files.Remove(systemd.BootedMarker)
	code, _, stderr := runAs(t, 0, "/root", "install-daemon")
	if code != exitcode.Unavailable || !strings.Contains(stderr, "systemd is not running on this machine") {
		t.Errorf("install-daemon: exit %d, stderr %q", code, stderr)
	}
	code, stdout, _ := runAs(t, 501, "/home/me", "install-daemon", "--dry-run")
	if code != exitcode.OK || !strings.Contains(stdout, "would run: systemctl enable macake-watch.service") || !strings.Contains(stdout, "# /etc/systemd/system/macake-watch.service (root:root 0644)\n# macake watch under systemd") {
		t.Errorf("dry run: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runAs(t, 0, "/root", "uninstall-daemon", "--dry-run", "--json")
	var rep struct {
		FormatVersion string `json:"format_version"`
		System        string `json:"system"`
		Path          string `json:"path"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != exitcode.OK || rep.FormatVersion != "3.0" || rep.System != "systemd" || rep.Path != systemd.UnitPath {
		t.Errorf("uninstall --dry-run --json: exit %d, %+v, %v", code, rep, err)
	}
	if len(m.systemd.Calls) != 0 {
		t.Errorf("ran systemctl: %q", m.systemd.Calls)
	}
	m.goos = "freebsd"
	if code, _, stderr := runAs(t, 0, "/root", "install-daemon"); code != exitcode.Unavailable || !strings.Contains(stderr, "on darwin and linux only") {
		t.Errorf("freebsd: exit %d, stderr %q", code, stderr)
	}
}

func TestSystemdUnitFlag(t *testing.T) {
	m := newFakeMac(t)
	m.goos = "linux"
	code, stdout, stderr := runAs(t, 0, "/root", "install-daemon", "--systemd-unit")
	want, _ := systemd.WatchUnit(service.Program{Binary: "/usr/local/bin/macake", ConfigDir: defaultConfigDir, StateDir: defaultStateDir})
	if code != exitcode.OK || stdout != string(want) {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, stdout, want)
	}
	code, stdout, _ = runAs(t, 1000, "/home/me", "install-agent", "--systemd-unit")
	if code != exitcode.OK || !strings.Contains(stdout, "ExecStart=/usr/local/bin/macake --config-dir /etc/macake/links.d --state-dir "+defaultStateDir+" monitor") {
		t.Errorf("agent unit: exit %d\n%s", code, stdout)
	}
}

func TestUninstallDaemonRunsDown(t *testing.T) {
	m := newFakeMac(t)
	m.stubDown(t, exitcode.OK, "removed everything")
	if code, _, stderr := runAs(t, 0, "/var/root", "install-daemon"); code != exitcode.OK {
		t.Fatalf("install: %s", stderr)
	}
	code, _, stderr := runAs(t, 0, "/var/root", "uninstall-daemon")
	if code != exitcode.OK || m.downs != 1 {
		t.Fatalf("exit %d, downs %d, stderr %q", code, m.downs, stderr)
	}
	mustContain(t, "stderr", stderr, "ran: /bin/launchctl bootout system/org.macake.watch", "removed /Library/LaunchDaemons/org.macake.watch.plist", "logs kept in /var/log/macake", "removed everything")
	if len(m.launchd.Loaded) != 0 {
		t.Error("job still loaded")
	}
	if _, err := m.files.Stat(launchd.DaemonPlistPath); !errors.Is(err, fs.ErrNotExist) {
		t.Error("plist still there")
	}
	// Nothing installed: says so, and still runs down (the user wants
	// shaping gone).
	code, _, stderr = runAs(t, 0, "/var/root", "uninstall-daemon")
	if code != exitcode.OK || m.downs != 2 || !strings.Contains(stderr, "not installed") {
		t.Errorf("second uninstall: exit %d, downs %d, stderr %q", code, m.downs, stderr)
	}
}

// While `down` is not built (or fails), uninstall-daemon still removes the
// job, then says what it could not do and exits 1.
func TestUninstallDaemonWhenDownFails(t *testing.T) {
	m := newFakeMac(t)
	m.stubDown(t, exitcode.Failure, "not implemented yet: down")
	runAs(t, 0, "/var/root", "install-daemon")
	code, stdout, stderr := runAs(t, 0, "/var/root", "uninstall-daemon", "--json")
	if code != exitcode.Failure {
		t.Errorf("exit %d, want 1", code)
	}
	mustContain(t, "stderr", stderr, "not implemented yet: down", "the LaunchDaemon is removed, but `macake down` failed (exit 1)", "sudo macake down")
	if len(m.launchd.Loaded) != 0 {
		t.Error("job still loaded")
	}
	var rep struct {
		DownExitCode *int `json:"down_exit_code"`
		Steps        []any
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.DownExitCode == nil || *rep.DownExitCode != 1 || len(rep.Steps) != 2 {
		t.Errorf("JSON %s: %+v, %v", stdout, rep, err)
	}
}

// If the bootout fails, watch may still run and would re-apply what down
// removes: down is not run.
func TestUninstallDaemonBootoutFailureSkipsDown(t *testing.T) {
	m := newFakeMac(t)
	m.stubDown(t, exitcode.OK, "")
	runAs(t, 0, "/var/root", "install-daemon")
	m.launchd.Fail("bootout", 1, "Boot-out failed: 1: Operation not permitted", -1)
	code, _, stderr := runAs(t, 0, "/var/root", "uninstall-daemon")
	if code != exitcode.Failure || m.downs != 0 || !strings.Contains(stderr, "Operation not permitted") || !strings.Contains(stderr, "down was not run") {
		t.Errorf("exit %d, downs %d, stderr %q", code, m.downs, stderr)
	}
}

func TestAgentCommands(t *testing.T) {
	m := newFakeMac(t)
	m.files.UID, m.files.GID = 501, 20
	code, stdout, stderr := runAs(t, 501, "/Users/you", "install-agent")
	if code != exitcode.OK || !strings.Contains(stdout, "Installed org.macake.monitor") || !strings.Contains(stdout, "launchctl print gui/501/org.macake.monitor") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "sudo") {
		t.Errorf("agent output suggests sudo:\n%s", stdout)
	}
	fi, err := m.files.Stat("/Users/you/Library/LaunchAgents/org.macake.monitor.plist")
	if err != nil || fi.UID != 501 || fi.Mode.Perm() != 0o644 {
		t.Errorf("agent plist: %+v, %v", fi, err)
	}
	// monitor rotates its own log: launchd's output files never are.
	if got := m.loadedArgs(t, "gui/501/org.macake.monitor"); !slices.Equal(got[len(got)-3:], []string{"monitor", "--log-file", "/Users/you/Library/Logs/macake/monitor.log"}) {
		t.Errorf("agent runs %q", got)
	}
	code, _, stderr = runAs(t, 501, "/Users/you", "uninstall-agent")
	if code != exitcode.OK || len(m.launchd.Loaded) != 0 || !strings.Contains(stderr, "Uninstalled org.macake.monitor") {
		t.Errorf("uninstall-agent: exit %d, loaded %v, stderr %q", code, m.launchd.Loaded, stderr)
	}
}

func TestAgentWithoutGUISession(t *testing.T) {
	m := newFakeMac(t)
	m.launchd.NoGUI = true
	code, stdout, stderr := runAs(t, 501, "/Users/you", "install-agent")
	if code != exitcode.OK || !strings.Contains(stdout, "starts at your next login") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// A dry run that cannot ask launchd (e.g. a non-root print refused) shows a
// fresh install with a warning; a real run stops.
func TestObserveFailure(t *testing.T) {
	m := newFakeMac(t)
	m.launchd.Fail("print", 1, "Operation not permitted", -1)
	code, stdout, stderr := runAs(t, 501, "/Users/you", "install-daemon", "--dry-run")
	if code != exitcode.OK || !strings.Contains(stderr, "cannot read the current state") || !strings.Contains(stdout, "would run: /bin/launchctl bootstrap") {
		t.Errorf("dry run: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	code, _, stderr = runAs(t, 0, "/var/root", "install-daemon")
	if code != exitcode.Failure || !strings.Contains(stderr, "Operation not permitted") {
		t.Errorf("real run: exit %d, stderr %q", code, stderr)
	}
	// An uninstall preview falls back to "installed", so it shows the removal.
	code, stdout, _ = runAs(t, 501, "/Users/you", "uninstall-daemon", "--dry-run")
	if code != exitcode.OK || !strings.Contains(stdout, "would run: /bin/launchctl bootout system/org.macake.watch") {
		t.Errorf("uninstall dry run: exit %d\n%s", code, stdout)
	}
}
