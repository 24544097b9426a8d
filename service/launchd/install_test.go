// SPDX-License-Identifier: Apache-2.0

package launchd_test

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/service"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/launchd/launchdtest"
	"github.com/macake/macake/service/servicetest"
)

var program = service.Program{Binary: "/usr/local/bin/macake", ConfigDir: "/etc/macake/links.d", StateDir: "/var/db/macake"}

const home = "/Users/you"

// machine is a fake Mac: file system, launchd, and an installer on them.
type machine struct {
	files   *servicetest.Files
	launchd *launchdtest.Launchd
	in      *launchd.Installer
	sleeps  []time.Duration
}

func newMachine() *machine {
	m := &machine{files: servicetest.NewFiles("/Library/LaunchDaemons", "/var/log", home)}
	m.launchd = launchdtest.NewLaunchd(m.files)
	m.in = &launchd.Installer{Files: m.files, Runner: m.launchd, Sleep: func(d time.Duration) { m.sleeps = append(m.sleeps, d) }}
	return m
}

func daemonJob(t *testing.T, binary string) launchd.Job {
	t.Helper()
	p := program
	p.Binary = binary
	j, err := launchd.DaemonJob(p)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// install observes, plans and applies, returning the steps it ran.
func (m *machine) install(t *testing.T, j launchd.Job, restart bool) ([]string, launchd.Outcome) {
	t.Helper()
	obs, err := m.in.Observe(context.Background(), j)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	var ran []string
	out, err := m.in.Apply(context.Background(), j, launchd.PlanInstall(j, obs, restart), func(s service.Step) { ran = append(ran, s.String()) })
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return ran, out
}

func (m *machine) uninstall(t *testing.T, j launchd.Job) []string {
	t.Helper()
	obs, err := m.in.Observe(context.Background(), j)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	var ran []string
	if _, err := m.in.Apply(context.Background(), j, launchd.PlanUninstall(j, obs), func(s service.Step) { ran = append(ran, s.String()) }); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return ran
}

func TestInstallDaemonFreshThenIdempotent(t *testing.T) {
	m := newMachine()
	j := daemonJob(t, "/usr/local/bin/macake")
	ran, _ := m.install(t, j, false)
	servicetest.WantRan(t, "fresh install", ran,
		"create /var/log/macake (root:wheel 0755)",
		"write /Library/LaunchDaemons/org.macake.watch.plist (root:wheel 0644)",
		"run /bin/launchctl enable system/org.macake.watch",
		"run /bin/launchctl bootstrap system /Library/LaunchDaemons/org.macake.watch.plist",
	)
	fi, _ := m.files.Stat(launchd.DaemonPlistPath)
	if fi.Mode.Perm() != 0o644 || fi.UID != 0 || fi.GID != 0 {
		t.Errorf("plist mode %v owner %d:%d, want 0644 root:wheel", fi.Mode, fi.UID, fi.GID)
	}
	if got := m.launchd.Loaded["system/org.macake.watch"]; string(got) != string(j.Plist) {
		t.Errorf("launchd loaded %q, want the rendered plist", got)
	}
	if di, err := m.files.Stat("/var/log/macake"); err != nil || !di.IsDir || di.Mode.Perm() != 0o755 {
		t.Errorf("log dir: %+v, %v", di, err)
	}

	// Same plist, loaded: nothing to do, and only reads happen.
	m.launchd.Calls = nil
	if ran, _ := m.install(t, j, false); len(ran) != 0 {
		t.Errorf("second install ran %q, want nothing", ran)
	}
	if !reflect.DeepEqual(m.launchd.Calls, []string{"/bin/launchctl print system/org.macake.watch"}) {
		t.Errorf("second install called %q, want one print", m.launchd.Calls)
	}

	// --restart on an unchanged job kickstarts it.
	if ran, _ := m.install(t, j, true); !reflect.DeepEqual(ran, []string{"run /bin/launchctl kickstart -k system/org.macake.watch"}) {
		t.Errorf("restart ran %q", ran)
	}
}

// A changed plist of a loaded job must be booted out first: bootstrapping
// over a loaded job fails with EIO (the fake does that, as launchd does).
func TestInstallDaemonChangedPlistReloads(t *testing.T) {
	m := newMachine()
	m.install(t, daemonJob(t, "/usr/local/bin/macake"), false)
	j := daemonJob(t, "/opt/homebrew/bin/macake")
	ran, _ := m.install(t, j, false)
	servicetest.WantRan(t, "changed plist", ran,
		"write /Library/LaunchDaemons/org.macake.watch.plist (root:wheel 0644)",
		"run /bin/launchctl bootout system/org.macake.watch",
		"run /bin/launchctl enable system/org.macake.watch",
		"run /bin/launchctl bootstrap system /Library/LaunchDaemons/org.macake.watch.plist",
	)
	if got := m.launchd.Loaded["system/org.macake.watch"]; string(got) != string(j.Plist) {
		t.Error("launchd did not load the new plist")
	}
}

// Same bytes with a loose mode or a foreign owner are rewritten: launchd is
// reported to refuse writable plists, and a user-owned one could be edited
// into running anything as root.
func TestInstallDaemonRepairsModeAndOwner(t *testing.T) {
	for name, mutate := range map[string]func(*servicetest.Files){
		"group-writable": func(f *servicetest.Files) { f.Chmod(launchd.DaemonPlistPath, 0o664) },
		"user-owned":     func(f *servicetest.Files) { f.Chown(launchd.DaemonPlistPath, 501, 20) },
	} {
		m := newMachine()
		j := daemonJob(t, "/usr/local/bin/macake")
		m.install(t, j, false)
		mutate(m.files)
		ran, _ := m.install(t, j, false)
		if len(ran) == 0 || !strings.HasPrefix(ran[0], "write ") {
			t.Errorf("%s: install ran %q, want a rewrite", name, ran)
		}
		if fi, _ := m.files.Stat(launchd.DaemonPlistPath); fi.Mode.Perm() != 0o644 || fi.UID != 0 {
			t.Errorf("%s: after install mode %v uid %d", name, fi.Mode, fi.UID)
		}
	}
}

func TestInstallDaemonPlistOnDiskButNotLoaded(t *testing.T) {
	m := newMachine()
	j := daemonJob(t, "/usr/local/bin/macake")
	m.install(t, j, false)
	delete(m.launchd.Loaded, j.ServiceTarget()) // e.g. someone ran bootout by hand
	ran, _ := m.install(t, j, false)
	want := []string{"run /bin/launchctl enable system/org.macake.watch", "run /bin/launchctl bootstrap system /Library/LaunchDaemons/org.macake.watch.plist"}
	if !reflect.DeepEqual(ran, want) {
		t.Errorf("ran %q, want %q", ran, want)
	}
}

// After bootout, launchd may take a moment to let go of the job; the
// installer polls instead of failing the bootstrap with EIO.
func TestInstallWaitsForBootoutToFinish(t *testing.T) {
	m := newMachine()
	m.install(t, daemonJob(t, "/usr/local/bin/macake"), false)
	m.launchd.LingerPrints = 3
	m.install(t, daemonJob(t, "/opt/homebrew/bin/macake"), false)
	if len(m.sleeps) != 3 {
		t.Errorf("slept %v, want three polls while the job lingered", m.sleeps)
	}
}

func TestBootoutThatNeverFinishesFails(t *testing.T) {
	m := newMachine()
	m.install(t, daemonJob(t, "/usr/local/bin/macake"), false)
	m.launchd.LingerPrints = 1000
	j := daemonJob(t, "/opt/homebrew/bin/macake")
	obs, _ := m.in.Observe(context.Background(), j)
	_, err := m.in.Apply(context.Background(), j, launchd.PlanInstall(j, obs, false), nil)
	if err == nil || !strings.Contains(err.Error(), "still loaded") {
		t.Fatalf("err = %v, want 'still loaded'", err)
	}
}

func TestBootstrapFailureCarriesLaunchctlMessageAndHint(t *testing.T) {
	m := newMachine()
	m.launchd.Fail("bootstrap", 5, "Bootstrap failed: 5: Input/output error", -1)
	j := daemonJob(t, "/usr/local/bin/macake")
	obs, _ := m.in.Observe(context.Background(), j)
	_, err := m.in.Apply(context.Background(), j, launchd.PlanInstall(j, obs, false), nil)
	var ee *execrun.Error
	if !errors.As(err, &ee) || ee.ExitCode != 5 {
		t.Fatalf("err = %v, want an *execrun.Error with exit 5", err)
	}
	for _, want := range []string{"bootstrap system /Library/LaunchDaemons/org.macake.watch.plist", "Input/output error", "plutil -lint", "launchctl print system/org.macake.watch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// EIO from bootstrap when the job is in fact loaded (someone else loaded it
// between our print and our bootstrap) is success, with a note.
func TestBootstrapEIOButLoadedIsANote(t *testing.T) {
	m := newMachine()
	j := daemonJob(t, "/usr/local/bin/macake")
	obs, _ := m.in.Observe(context.Background(), j)
	m.launchd.Loaded[j.ServiceTarget()] = j.Plist
	out, err := m.in.Apply(context.Background(), j, launchd.PlanInstall(j, obs, false), nil)
	if err != nil || len(out.Notes) != 1 || !strings.Contains(out.Notes[0], "already had") {
		t.Fatalf("Apply = %+v, %v; want success with an 'already had' note", out, err)
	}
}

// Right after our own bootout, an EIO is launchd still tearing down: retry.
func TestBootstrapRetriesAfterBootout(t *testing.T) {
	m := newMachine()
	m.install(t, daemonJob(t, "/usr/local/bin/macake"), false)
	m.launchd.Fail("bootstrap", 37, "Bootstrap failed: 37: Operation already in progress", 2)
	m.install(t, daemonJob(t, "/opt/homebrew/bin/macake"), false)
	if len(m.sleeps) != 2 {
		t.Errorf("slept %v, want two retries", m.sleeps)
	}
}

func TestObserveFailsOnUnknownPrintError(t *testing.T) {
	m := newMachine()
	m.launchd.Fail("print", 1, "Operation not permitted", -1)
	_, err := m.in.Observe(context.Background(), daemonJob(t, "/usr/local/bin/macake"))
	if err == nil || !strings.Contains(err.Error(), "Operation not permitted") || !strings.Contains(err.Error(), "whether org.macake.watch is loaded") {
		t.Fatalf("err = %v", err)
	}
}

func TestUninstallDaemon(t *testing.T) {
	m := newMachine()
	j := daemonJob(t, "/usr/local/bin/macake")
	m.install(t, j, false)
	ran := m.uninstall(t, launchd.Daemon())
	want := []string{"run /bin/launchctl bootout system/org.macake.watch", "remove /Library/LaunchDaemons/org.macake.watch.plist"}
	if !reflect.DeepEqual(ran, want) {
		t.Fatalf("uninstall ran %q, want %q", ran, want)
	}
	if _, err := m.files.Stat(launchd.DaemonPlistPath); !errors.Is(err, fs.ErrNotExist) {
		t.Error("plist still there")
	}
	if len(m.launchd.Loaded) != 0 {
		t.Error("job still loaded")
	}
	if _, err := m.files.Stat(launchd.DaemonLogDir); err != nil {
		t.Error("uninstall removed the logs")
	}
	if ran := m.uninstall(t, launchd.Daemon()); len(ran) != 0 {
		t.Errorf("second uninstall ran %q, want nothing", ran)
	}
}

// A bootout racing with another one ("not found" after we saw it loaded)
// is the state we wanted, not an error.
func TestUninstallBootoutNotFoundIsFine(t *testing.T) {
	m := newMachine()
	m.install(t, daemonJob(t, "/usr/local/bin/macake"), false)
	m.launchd.Fail("bootout", 3, "Boot-out failed: 3: No such process", 1)
	m.uninstall(t, launchd.Daemon())
	if _, err := m.files.Stat(launchd.DaemonPlistPath); !errors.Is(err, fs.ErrNotExist) {
		t.Error("plist still there")
	}
}

func agentJob(t *testing.T) launchd.Job {
	t.Helper()
	j, err := launchd.AgentJob(program, home, 501)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestInstallAgent(t *testing.T) {
	m := newMachine()
	m.files.UID, m.files.GID = 501, 20
	j := agentJob(t)
	ran, _ := m.install(t, j, false)
	servicetest.WantRan(t, "agent install", ran,
		"create /Users/you/Library/LaunchAgents (0755)",
		"create /Users/you/Library/Logs/macake (0755)",
		"write /Users/you/Library/LaunchAgents/org.macake.monitor.plist (0644)",
		"run /bin/launchctl enable gui/501/org.macake.monitor",
		"run /bin/launchctl bootstrap gui/501 /Users/you/Library/LaunchAgents/org.macake.monitor.plist",
	)
	if fi, _ := m.files.Stat(j.PlistPath); fi.UID != 501 {
		t.Errorf("agent plist owned by %d, want the user", fi.UID)
	}
	if ran, _ := m.install(t, j, false); len(ran) != 0 {
		t.Errorf("second agent install ran %q", ran)
	}
	if ran := m.uninstall(t, launchd.Agent(home, 501)); len(ran) != 2 {
		t.Errorf("agent uninstall ran %q", ran)
	}
}

// Over ssh there is no gui/<uid> domain: install the plist, load nothing,
// and say it starts at the next login.
func TestInstallAgentWithoutGUISession(t *testing.T) {
	m := newMachine()
	m.launchd.NoGUI = true
	j := agentJob(t)
	obs, err := m.in.Observe(context.Background(), j)
	if err != nil || !obs.NoSession {
		t.Fatalf("Observe = %+v, %v; want NoSession", obs, err)
	}
	steps := launchd.PlanInstall(j, obs, false)
	for _, s := range steps {
		if s.Kind == service.StepRun {
			t.Errorf("planned %s without a GUI session", s)
		}
	}
	if _, err := m.in.Apply(context.Background(), j, steps, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.files.Stat(j.PlistPath); err != nil {
		t.Error("plist not installed")
	}
	// The session vanishing between print and bootstrap is the same case.
	m2 := newMachine()
	obs, _ = m2.in.Observe(context.Background(), j)
	steps = launchd.PlanInstall(j, obs, false)
	if _, err := m2.in.Apply(context.Background(), j, steps[:len(steps)-1], nil); err != nil {
		t.Fatal(err)
	}
	m2.launchd.NoGUI = true
	out, err := m2.in.Apply(context.Background(), j, steps[len(steps)-1:], nil)
	if err != nil || len(out.Notes) != 1 || !strings.Contains(out.Notes[0], "next login") {
		t.Errorf("bootstrap without GUI: %+v, %v", out, err)
	}
}

func TestPlanIsPure(t *testing.T) {
	j := daemonJob(t, "/usr/local/bin/macake")
	for _, tc := range []struct {
		name string
		obs  service.Observation
		want []service.StepKind
	}{
		{"fresh", launchd.Fresh(j), []service.StepKind{service.StepMkdir, service.StepWrite, service.StepRun, service.StepRun}},
		{"installed", service.Observation{File: service.FileSame, Loaded: true}, nil},
		{"changed", service.Observation{File: service.FileDifferent, Loaded: true}, []service.StepKind{service.StepWrite, service.StepRun, service.StepRun, service.StepRun}},
		{"file only", service.Observation{File: service.FileSame}, []service.StepKind{service.StepRun, service.StepRun}},
	} {
		var kinds []service.StepKind
		for _, s := range launchd.PlanInstall(j, tc.obs, false) {
			kinds = append(kinds, s.Kind)
		}
		if !reflect.DeepEqual(kinds, tc.want) {
			t.Errorf("%s: kinds %v, want %v", tc.name, kinds, tc.want)
		}
	}
}
