// SPDX-License-Identifier: Apache-2.0

// Package launchdtest provides a fake of launchctl for tests of code that
// installs launchd jobs, so they run on Linux.
package launchdtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/service"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/servicetest"
)

// Launchd is a execrun.Runner that answers launchctl the way
// reference/darwin-and-linux.md §8 and field reports describe it: print
// exits 113 for an unknown service; bootstrap of a loaded job or of a plist
// it cannot read exits 5 (EIO); bootout of an unknown job exits 113; a
// missing gui domain is "Could not find domain" (bootstrap: 125).
type Launchd struct {
	files *servicetest.Files
	// Loaded maps a service target to the plist bytes launchd read.
	Loaded map[string][]byte
	// NoGUI makes every gui/ domain missing (an ssh-only session).
	NoGUI bool
	// LingerPrints keeps a booted-out job visible to this many prints.
	LingerPrints int
	lingering    string
	override     map[string]overrideResult
	// Calls records every command line run, in order.
	Calls []string
}

type overrideResult struct {
	res execrun.Result
	n   int
}

// NewLaunchd returns a launchd with nothing loaded that reads plists from files.
func NewLaunchd(files *servicetest.Files) *Launchd {
	return &Launchd{files: files, Loaded: map[string][]byte{}, override: map[string]overrideResult{}}
}

// InstallDaemon installs prog's LaunchDaemon, its binary included, as
// `macake install-daemon` does, into this launchd and its files: a test's
// Mac with the daemon installed and loaded. It fails tb on error.
func (l *Launchd) InstallDaemon(tb testing.TB, prog service.Program) {
	tb.Helper()
	l.files.AddFile(prog.Binary, []byte("binary"), 0o755, 0, 0)
	job, err := launchd.DaemonJob(prog)
	if err != nil {
		tb.Fatal(err)
	}
	in := &launchd.Installer{Files: l.files, Runner: l, Sleep: func(time.Duration) {}}
	obs, err := in.Observe(context.Background(), job)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := in.Apply(context.Background(), job, launchd.PlanInstall(job, obs, false), nil); err != nil {
		tb.Fatal(err)
	}
}

// Fail makes the next n calls of launchctl subcommand sub (all of them when
// n is -1) exit with code and print msg on stderr.
func (l *Launchd) Fail(sub string, code int, msg string, n int) {
	l.override[sub] = overrideResult{res: execrun.Result{ExitCode: code, Stderr: []byte(msg + "\n")}, n: n}
}

func exit(code int, stderr string) (execrun.Result, error) {
	return execrun.Result{ExitCode: code, Stderr: []byte(stderr)}, nil
}

// Run implements execrun.Runner.
func (l *Launchd) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	l.Calls = append(l.Calls, strings.Join(cmd.Argv, " "))
	if cmd.Argv[0] != launchd.Launchctl || len(cmd.Argv) < 3 {
		return execrun.Result{}, fmt.Errorf("fake launchd: unexpected command %q", cmd.Argv)
	}
	sub, arg := cmd.Argv[1], cmd.Argv[len(cmd.Argv)-1]
	if o, ok := l.override[sub]; ok && o.n != 0 {
		o.n--
		l.override[sub] = o
		return o.res, nil
	}
	domainOf := func(target string) string { return target[:strings.LastIndex(target, "/")] }
	if l.NoGUI && strings.HasPrefix(cmd.Argv[2], "gui/") {
		if sub == "bootstrap" {
			return exit(125, "Bootstrap failed: 125: Domain does not support specified action\n")
		}
		return exit(113, "Could not find domain for user gui: 501\n")
	}
	switch sub {
	case "print":
		if _, ok := l.Loaded[arg]; ok || (l.lingering == arg && l.LingerPrints > 0) {
			if l.lingering == arg && l.LingerPrints > 0 {
				l.LingerPrints--
			}
			return execrun.Result{Stdout: []byte(arg + " = {\n\tstate = running\n}\n")}, nil
		}
		return exit(113, fmt.Sprintf("Bad request.\nCould not find service %q in domain for %s\n", arg[strings.LastIndex(arg, "/")+1:], domainOf(arg)))
	case "enable":
		return execrun.Result{}, nil
	case "bootstrap":
		domain := cmd.Argv[2]
		data, err := l.files.ReadFile(arg)
		if err != nil {
			return exit(5, "Bootstrap failed: 5: Input/output error\n")
		}
		v, err := launchd.Decode(data)
		d, _ := v.(launchd.Dict)
		label, _ := d.Get("Label").(launchd.String)
		if err != nil || label == "" {
			return exit(5, "Bootstrap failed: 5: Input/output error\n")
		}
		target := domain + "/" + string(label)
		if _, ok := l.Loaded[target]; ok || l.lingering == target && l.LingerPrints > 0 {
			return exit(5, "Bootstrap failed: 5: Input/output error\n")
		}
		l.Loaded[target] = data
		return execrun.Result{}, nil
	case "bootout":
		if _, ok := l.Loaded[arg]; !ok {
			return exit(113, "Boot-out failed: 113: Could not find specified service\n")
		}
		delete(l.Loaded, arg)
		if l.LingerPrints > 0 {
			l.lingering = arg
		}
		return execrun.Result{}, nil
	case "kickstart":
		if _, ok := l.Loaded[arg]; !ok {
			return exit(113, fmt.Sprintf("Could not find service %q in domain for %s\n", arg, domainOf(arg)))
		}
		return execrun.Result{}, nil
	}
	return exit(64, "Unrecognized subcommand: "+sub)
}
