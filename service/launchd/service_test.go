// SPDX-License-Identifier: Apache-2.0

package launchd_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/service"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/launchd/launchdtest"
	"github.com/macake/macake/service/servicetest"
)

// fakeHost is a Mac with an installed, root-owned /usr/local/bin/macake.
func fakeHost() (service.Host, *servicetest.Files, *launchdtest.Launchd) {
	files := servicetest.NewFiles("/Library/LaunchDaemons", "/var/log", "/etc/macake/links.d", home)
	files.AddFile("/usr/local/bin/macake", []byte("binary"), 0o755, 0, 0)
	ld := launchdtest.NewLaunchd(files)
	return service.Host{GOOS: "darwin", Files: files, Runner: ld,
		Executable: func() (string, error) { return "/usr/local/bin/macake", nil },
		Sleep:      func(time.Duration) {}}, files, ld
}

// said collects what a Progress hears, in order.
type said struct{ lines []string }

func (s *said) progress() service.Progress {
	return service.Progress{
		Warning: func(m string) { s.lines = append(s.lines, "warning: "+m) },
		Note:    func(m string) { s.lines = append(s.lines, "note: "+m) },
		Done:    func(st service.Step) { s.lines = append(s.lines, "done: "+st.String()) },
		Applied: func(*service.Report) { s.lines = append(s.lines, "applied") },
	}
}

func TestInstallAndUninstall(t *testing.T) {
	h, _, ld := fakeHost()
	var s said
	rep, err := (launchd.Manager{Host: h}).Install(context.Background(), service.InstallRequest{Program: program, Warnings: []string{"w"}}, s.progress())
	if err != nil || !rep.Changed || rep.Warnings[0].Message != "w" || rep.ServiceTarget != "system/org.macake.watch" || rep.Label != launchd.DaemonLabel {
		t.Fatalf("install: %+v, %v", rep, err)
	}
	if _, ok := ld.Loaded["system/org.macake.watch"]; !ok || s.lines[len(s.lines)-1] != "applied" || len(s.lines) != len(rep.Steps)+1 {
		t.Errorf("not loaded, or said %q", s.lines)
	}
	rep, err = (launchd.Manager{Host: h}).Install(context.Background(), service.InstallRequest{Program: program}, service.Progress{})
	if err != nil || rep.Changed || rep.Steps == nil {
		t.Errorf("second install: %+v, %v; want no steps, as an empty list", rep, err)
	}

	downs := 0
	down := func() int { downs++; return 1 }
	s = said{}
	rep, err = (launchd.Manager{Host: h}).Uninstall(context.Background(), service.UninstallRequest{Down: down}, s.progress())
	var downErr *service.DownError
	if !errors.As(err, &downErr) || downErr.ExitCode != 1 || downs != 1 || *rep.DownExitCode != 1 || rep.Error == nil || rep.Error.Message != err.Error() || len(ld.Loaded) != 0 {
		t.Errorf("uninstall: %+v, %v, downs %d", rep, err, downs)
	}
	if i := slices.Index(s.lines, "applied"); i != len(s.lines)-1 {
		t.Errorf("applied is not the last thing said before down: %q", s.lines)
	}
}

// A failed bootout leaves watch running, which would re-apply what down
// removes: down is not run.
func TestUninstallBootoutFailureSkipsDown(t *testing.T) {
	h, _, ld := fakeHost()
	if _, err := (launchd.Manager{Host: h}).Install(context.Background(), service.InstallRequest{Program: program}, service.Progress{}); err != nil {
		t.Fatal(err)
	}
	ld.Fail("bootout", 1, "Boot-out failed: 1: Operation not permitted", -1)
	downs := 0
	rep, err := (launchd.Manager{Host: h}).Uninstall(context.Background(), service.UninstallRequest{Down: func() int { downs++; return 0 }}, service.Progress{})
	var downErr *service.DownError
	if err == nil || errors.As(err, &downErr) || downs != 0 || rep == nil || rep.DownExitCode != nil || rep.Error == nil || !strings.Contains(rep.Error.Message, "Operation not permitted") {
		t.Errorf("%+v, %v, downs %d", rep, err, downs)
	}
}

// Off macOS a dry run shows what a Mac would get, and asks nothing.
func TestDryRunOffMacOS(t *testing.T) {
	h, _, ld := fakeHost()
	h.GOOS = "linux"
	var s said
	rep, err := (launchd.Manager{Host: h}).Install(context.Background(), service.InstallRequest{Program: program, DryRun: true}, s.progress())
	if err != nil || !rep.DryRun || rep.Content == "" || len(rep.Notes) != 1 || !slices.Equal(s.lines, []string{"note: " + rep.Notes[0]}) {
		t.Fatalf("install: %+v, %v, said %q", rep, err, s.lines)
	}
	rep, err = (launchd.Manager{Host: h}).Uninstall(context.Background(), service.UninstallRequest{DryRun: true, Down: func() int { t.Error("down ran in a dry run"); return 0 }}, service.Progress{})
	if err != nil || len(rep.Steps) != 2 || rep.DownExitCode != nil {
		t.Errorf("uninstall: %+v, %v", rep, err)
	}
	if len(ld.Calls) != 0 {
		t.Errorf("ran launchctl: %q", ld.Calls)
	}
}

func TestObserveFailureStopsARealRun(t *testing.T) {
	h, _, ld := fakeHost()
	ld.Fail("print", 1, "Operation not permitted", -1)
	if rep, err := (launchd.Manager{Host: h}).Install(context.Background(), service.InstallRequest{Program: program}, service.Progress{}); rep != nil || err == nil {
		t.Errorf("install: %+v, %v", rep, err)
	}
	rep, err := (launchd.Manager{Host: h}).Install(context.Background(), service.InstallRequest{Program: program, DryRun: true}, service.Progress{})
	if err != nil || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0].Message, "cannot read the current state") {
		t.Errorf("dry run: %+v, %v", rep, err)
	}
}
