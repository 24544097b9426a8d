// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/diag"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/service"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/launchd/launchdtest"
	"github.com/macake/macake/service/servicetest"
	"github.com/macake/macake/session"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// wanPolicy is the policy most scenarios shape: en0, two loopback-only
// reflectors (documentation addresses; the fake pinger answers for them).
var wanPolicy = configtest.Policy{Interface: "en0", Download: "250mbit", Upload: "20mbit"}.TOML() + `[autorate]
reflectors = ["192.0.2.1", "192.0.2.2"]
active_reflectors = 2
cut_refractory = "1s"
`

// en0Facts: en0 is up and carries the default route.
const en0Facts = `{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","default":true}]}`

// fakeMac is an emulated Mac as doctor sees it: the pf/dummynet emulator,
// a policy directory and a state directory on disk, launchd and its files
// in memory, and fakes for ICMP, the pinger, the counters and watch.
type fakeMac struct {
	t         *testing.T
	emu       *pfdntest.Emulator
	mem       *servicetest.Files
	launchctl *launchdtest.Launchd
	fs        *testFS
	icmp      fakeICMP
	pinger    *fakePinger
	counters  *fakeCounters
	watch     *fakeWatch
	configDir string
	stateDir  string
	factsFile string
	euid      int
	env       map[string]string
}

func newFakeMac(t *testing.T, policies map[string]string) *fakeMac {
	t.Helper()
	root := t.TempDir()
	m := &fakeMac{
		t: t, emu: pfdntest.New(),
		mem:       servicetest.NewFiles("/Library/LaunchDaemons", "/usr/local/bin"),
		icmp:      fakeICMP{},
		pinger:    &fakePinger{rtt: 12300 * time.Microsecond},
		counters:  &fakeCounters{readings: []ifstat.Counters{{RxBytes: 1000, TxBytes: 500, RxPackets: 10, TxPackets: 5, Index: 4}, {RxBytes: 126000, TxBytes: 13000, RxPackets: 100, TxPackets: 50, Index: 4}}},
		watch:     &fakeWatch{},
		configDir: filepath.Join(root, "etc", "links.d"),
		stateDir:  filepath.Join(root, "state"),
		factsFile: filepath.Join(root, "facts.json"),
		env:       map[string]string{},
	}
	m.emu.SetClock(func() time.Time { return harnessEpoch })
	m.launchctl = launchdtest.NewLaunchd(m.mem)
	m.fs = &testFS{mem: m.mem, rootOwned: true}
	if err := os.MkdirAll(m.configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range policies {
		m.writePolicy(name, text)
	}
	m.setFacts(en0Facts)
	return m
}

func (m *fakeMac) writePolicy(name, text string) {
	m.t.Helper()
	configtest.Write(m.t, m.configDir, name, text)
}

func (m *fakeMac) setFacts(facts string) {
	m.t.Helper()
	if err := os.WriteFile(m.factsFile, []byte(facts), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// system is what doctor inspects.
func (m *fakeMac) system() System {
	env := maps.Clone(m.env)
	return System{
		GOOS: "darwin", GOARCH: "arm64", OSVersion: "macOS 15.1",
		EUID: m.euid, Groups: []int{20}, Getenv: func(k string) string { return env[k] },
		ConfigDir: m.configDir, StateDir: m.stateDir,
		Runner: m.emu, FS: m.fs,
		Facts:    &linkfacts.FileSource{Path: m.factsFile},
		Counters: m.counters, CounterWait: time.Second,
		Sleep: func(context.Context, time.Duration) error { return nil },
		ICMP:  m.icmp, Pinger: m.pinger,
		Launchctl: m.launchctl, Watch: m.watch, AskWatch: m.watch.ask,
		Now: func() time.Time { return harnessEpoch },
	}
}

// run runs every check.
func (m *fakeMac) run() report.Report {
	m.t.Helper()
	m.counters.reset()
	return Run(context.Background(), NewInspection(m.system()), Checks)
}

// apply shapes the active policies on the emulator as `macake apply` does,
// saving the slots and the pf token in the state file.
func (m *fakeMac) apply() {
	m.t.Helper()
	ctx := context.Background()
	pol, err := settings.LoadPolicies(m.configDir, config.LoadOptions{SkipOwnershipCheck: true})
	if err != nil {
		m.t.Fatal(err)
	}
	st, err := state.Load(m.stateDir)
	if err != nil {
		m.t.Fatal(err)
	}
	tokens := &state.File{Dir: m.stateDir, State: st}
	b, err := backend.Open(backend.Config{Settings: session.BackendSettings(pol.Settings), Store: tokens, Runner: m.emu, GOOS: "darwin",
		Getenv: func(string) string { return "" }})
	if err != nil {
		m.t.Fatal(err)
	}
	facts, err := (&linkfacts.FileSource{Path: m.factsFile}).Facts(ctx)
	if err != nil {
		m.t.Fatal(err)
	}
	out := reconcile.Pass(ctx, reconcile.PassInput{Run: reconcile.Run{Backend: b, Store: tokens, Do: reconcile.ApplyPlan}, Links: pol.Links, Facts: facts, Inputs: desired.Inputs{State: st}})
	if out.Err != nil {
		m.t.Fatal(out.Err)
	}
}

// installDaemon installs the LaunchDaemon as `macake install-daemon` does,
// into the in-memory launchd.
func (m *fakeMac) installDaemon() service.Program {
	m.t.Helper()
	prog := service.Program{Binary: "/usr/local/bin/macake", ConfigDir: m.configDir, StateDir: m.stateDir}
	m.mem.AddFile(prog.Binary, []byte("binary"), 0o755, 0, 0)
	job, err := launchd.DaemonJob(prog)
	if err != nil {
		m.t.Fatal(err)
	}
	in := &launchd.Installer{Files: m.mem, Runner: m.launchctl, Sleep: func(time.Duration) {}}
	obs, err := in.Observe(context.Background(), job)
	if err != nil {
		m.t.Fatal(err)
	}
	if _, err := in.Apply(context.Background(), job, launchd.PlanInstall(job, obs, false), nil); err != nil {
		m.t.Fatal(err)
	}
	m.watch.state = WatchState{Running: true, PID: 4242, Holder: state.HolderWatch, Via: "the state lock"}
	m.watch.status = healthyDaemon()
	return prog
}

// foreign runs a command as another tool would.
func (m *fakeMac) foreign(stdin string, argv ...string) {
	m.t.Helper()
	res, err := m.emu.Foreign(context.Background(), stdin, argv...)
	if err != nil || res.ExitCode != 0 {
		m.t.Fatalf("%s: %v exit %d: %s", strings.Join(argv, " "), err, res.ExitCode, res.Stderr)
	}
}

// result returns the result of check id, failing when it is absent.
func result(t *testing.T, rep report.Report, id string) report.Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no result for %s", id)
	return report.Result{}
}

// testFS answers from the in-memory launchd files first, then from the
// real file system, where it reports root as the owner when rootOwned is
// set (the test's temporary files belong to whoever runs the tests).
type testFS struct {
	mem       *servicetest.Files
	rootOwned bool
	// owners overrides the owner of real paths.
	owners map[string]int
}

func (f *testFS) Stat(path string) (service.FileInfo, error) {
	if fi, err := f.mem.Stat(path); err == nil {
		return fi, nil
	}
	fi, err := service.OSFiles{}.Stat(path)
	if err != nil {
		return fi, err
	}
	if uid, set := f.owners[path]; set {
		fi.UID = uid
	} else if f.rootOwned {
		fi.UID, fi.GID = 0, 0
	}
	return fi, nil
}

func (f *testFS) ReadFile(path string) ([]byte, error) {
	if b, err := f.mem.ReadFile(path); err == nil {
		return b, nil
	}
	return os.ReadFile(path)
}

// fakeICMP fails the networks it names.
type fakeICMP map[string]error

func (f fakeICMP) Open(network string) error { return f[network] }

// fakePinger answers every target with rtt, except the silent ones.
type fakePinger struct {
	rtt    time.Duration
	silent map[netip.Addr]bool
	// silentVia are interfaces through which no target answers.
	silentVia map[string]bool
	err       error
	mu        sync.Mutex
	asked     []netip.Addr
	// askedVia lists the targets asked through each interface.
	askedVia map[string][]netip.Addr
}

func (p *fakePinger) Ping(_ context.Context, iface string, probes []shape.Reflector) ([]Echo, error) {
	targets := shape.ReflectorAddrs(probes)
	p.mu.Lock()
	p.asked = append(p.asked, targets...)
	if p.askedVia == nil {
		p.askedVia = map[string][]netip.Addr{}
	}
	p.askedVia[iface] = append(p.askedVia[iface], targets...)
	p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	var out []Echo
	for _, t := range targets {
		e := Echo{Target: t, Interface: iface, Sent: 3, Received: 3, RTT: p.rtt}
		if p.silent[t] || p.silentVia[iface] {
			e.Received, e.RTT = 0, 0
		}
		out = append(out, e)
	}
	return out, nil
}

// fakeCounters returns its readings in turn, then the last one again.
type fakeCounters struct {
	mu       sync.Mutex
	readings []ifstat.Counters
	err      error
	next     int
	iface    string
}

func (c *fakeCounters) reset() {
	c.mu.Lock()
	c.next = 0
	c.mu.Unlock()
}

func (c *fakeCounters) Read(iface string) (ifstat.Counters, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.iface = iface
	if c.err != nil {
		return ifstat.Counters{}, c.err
	}
	r := c.readings[min(c.next, len(c.readings)-1)]
	c.next++
	return r, nil
}

// fakeWatch reports a fixed state: the lock's, and what the daemon
// answers on its socket (nothing answers while status is nil).
type fakeWatch struct {
	state  WatchState
	err    error
	status *statusapi.Status
	askErr error
}

func (w *fakeWatch) Watch(context.Context, string) (WatchState, error) { return w.state, w.err }

func (w *fakeWatch) ask(_ context.Context, stateDir string) (statusapi.Status, error) {
	switch {
	case w.askErr != nil:
		return statusapi.Status{}, w.askErr
	case w.status == nil:
		return statusapi.Status{}, fmt.Errorf("%w (nothing answers on %s)", statusapi.ErrNotRunning, statusapi.SocketPath(stateDir))
	}
	return *w.status, nil
}

// harnessEpoch is the fake Mac's "now".
var harnessEpoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// healthyDaemon is what a content `macake watch` answers: up 3 hours, the
// last drift check 12 s ago changed nothing.
func healthyDaemon() *statusapi.Status {
	return &statusapi.Status{
		FormatVersion: statusapi.FormatVersion,
		Daemon:        statusapi.Daemon{Running: true, PID: 4242, Version: "v1.2.0", StartedAt: harnessEpoch.Add(-3 * time.Hour)},
		Links:         []statusapi.Link{{Name: "wan", Interface: "en0", Shaped: true}},
		LastApply:     &statusapi.Apply{At: harnessEpoch.Add(-12 * time.Second), Trigger: "drift", Result: "no_changes"},
		ConfigErrors:  []statusapi.ConfigError{}, Problems: []diag.Diagnostic{},
	}
}
