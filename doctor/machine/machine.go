// SPDX-License-Identifier: Apache-2.0

// Package machine is the System doctor inspects on the machine it runs
// on (Local): the real runner, files, link facts and counters, and the
// seams that look at this machine directly: whether an ICMP socket opens
// (SocketOpener), echoes through the prober (ProbePinger), who holds the
// state lock (LockProbe), the OS version. Package doctor's checks read
// only the System, so its tests pass fakes.
package machine

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/doctor"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/service"
)

// DefaultCounterWait is how long doctor waits between two readings of the
// interface counters.
const DefaultCounterWait = time.Second

// Options are what Local needs from the command line.
type Options struct {
	Getenv            func(string) string
	ConfigDir         string
	StateDir          string
	StateDirIsDefault bool
	// Runner runs the backends' tools; nil means real processes. The CLI
	// tests pass the pf/dummynet emulator.
	Runner execrun.Runner
}

// Local returns the System of this machine and a function that releases
// what it opened (the link-facts socket).
func Local(o Options) (doctor.System, func()) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	run := o.Runner
	if run == nil {
		run = execrun.Exec{Timeout: doctor.ToolTimeout}
	}
	groups, _ := os.Getgroups()
	sys := doctor.System{
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, OSVersion: OSVersion(),
		EUID: os.Geteuid(), Groups: append([]int{os.Getegid()}, groups...), Getenv: getenv,
		ConfigDir: o.ConfigDir, StateDir: o.StateDir, StateDirIsDefault: o.StateDirIsDefault,
		Runner: run, FS: service.OSFiles{},
		Counters: ifstat.NewReader(), CounterWait: DefaultCounterWait,
		ICMP: SocketOpener{}, PingGroupRange: readPingGroupRange,
		Pinger:         ProbePinger{},
		TCCapabilities: func(ctx context.Context) tc.Capabilities { return tc.Probe(ctx, run, tc.DefaultTools()) },
		Launchctl:      execrun.Exec{Timeout: doctor.ToolTimeout},
		Watch:          LockProbe{},
		AskWatch: func(ctx context.Context, stateDir string) (statusapi.Status, error) {
			return statusapi.Fetch(ctx, statusapi.SocketPath(stateDir))
		},
	}
	closeFn := func() {}
	src, err := linkfacts.FromEnv(getenv, linkfacts.PolicyOptions())
	if err != nil {
		sys.Facts = failingFacts{err}
	} else {
		sys.Facts = src
		if c, isCloser := src.(io.Closer); isCloser {
			closeFn = func() { c.Close() }
		}
	}
	return sys, closeFn
}

// readPingGroupRange reads net.ipv4.ping_group_range of this network
// namespace.
func readPingGroupRange() (string, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ping_group_range")
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}

// failingFacts is a link-facts source that could not be opened.
type failingFacts struct{ err error }

func (f failingFacts) Facts(context.Context) (linkfacts.Facts, error) {
	return linkfacts.Facts{}, fmt.Errorf("opening the link-facts source: %w", f.err)
}
