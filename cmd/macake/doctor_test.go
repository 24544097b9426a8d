// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/daemon/operator"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/doctor"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/service"
	"github.com/macake/macake/service/launchd/launchdtest"
	"github.com/macake/macake/service/servicetest"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// doctorPolicy probes documentation addresses: the fake pinger answers for
// them, and nothing is ever sent.
const doctorPolicy = starlinkShaping + `[autorate]
reflectors        = ["192.0.2.1", "192.0.2.2"]
active_reflectors = 2
cut_refractory    = "1s"
`

// doctorRig is the apply rig (the emulated Mac behind the CLI) plus the
// fakes doctor needs on Linux: macOS as the platform, launchd and its
// files in memory, and an ICMP opener, pinger and counters that send and
// read nothing.
type doctorRig struct {
	*rig
	root      string
	mem       *servicetest.Files
	launchctl *launchdtest.Launchd
	silent    map[netip.Addr]bool
	watch     doctor.WatchState
}

func newDoctorRig(t *testing.T) *doctorRig {
	t.Helper()
	r := &doctorRig{rig: newRig(t, nil, starlinkFacts), root: t.TempDir()}
	r.configDir = filepath.Join(r.root, "etc", "links.d")
	r.stateDir = filepath.Join(r.root, "state")
	if err := os.MkdirAll(r.configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.setPolicies(map[string]string{"starlink": doctorPolicy})
	r.mem = servicetest.NewFiles("/Library/LaunchDaemons", "/usr/local/bin")
	r.launchctl = launchdtest.NewLaunchd(r.mem)
	r.emu.SetClock(func() time.Time { return doctorEpoch })
	doctorSystemHook = r.hook
	t.Cleanup(func() { doctorSystemHook = nil })
	return r
}

func (r *doctorRig) hook(sys *doctor.System) {
	getenv := sys.Getenv
	sys.Getenv = func(k string) string {
		if k == backend.EnvBackend {
			return "" // the platform chooses, as on a Mac
		}
		return getenv(k)
	}
	sys.GOOS, sys.GOARCH, sys.OSVersion = "darwin", "arm64", "macOS 15.1"
	sys.Groups = []int{20}
	sys.FS = rootOwnedFS{r.mem}
	sys.ICMP = openAll{}
	sys.Pinger = fakeEchoes{silent: r.silent}
	sys.Counters = &twoReadings{}
	sys.Sleep = func(context.Context, time.Duration) error { return nil }
	sys.Launchctl = r.launchctl
	sys.Watch = staticWatch{r.watch}
	sys.Now = func() time.Time { return doctorEpoch }
}

// doctorEpoch is the rig's "now".
var doctorEpoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// serveDaemonStatus answers on the state directory's watch.sock as a
// content `macake watch` does (doctor asks it through the real client).
func (r *doctorRig) serveDaemonStatus() {
	r.t.Helper()
	if err := os.MkdirAll(r.stateDir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	ln, err := statusapi.Listen(statusapi.SocketPath(r.stateDir), operator.Policy{})
	if err != nil {
		r.t.Fatal(err)
	}
	st := statusapi.Status{
		FormatVersion: statusapi.FormatVersion,
		Daemon:        statusapi.Daemon{Running: true, PID: 4242, Version: "v1.2.0", StartedAt: doctorEpoch.Add(-3 * time.Hour)},
		LastApply:     &statusapi.Apply{At: doctorEpoch.Add(-12 * time.Second), Trigger: "drift", Result: "no_changes"},
	}
	go statusapi.Serve(r.t.Context(), ln, statusapi.Handler{Status: func(context.Context, statusapi.Query) statusapi.Status { return st }}, nil)
}

// installDaemon does what `sudo macake install-daemon` does, in memory.
func (r *doctorRig) installDaemon() {
	r.t.Helper()
	r.launchctl.InstallDaemon(r.t, service.Program{Binary: "/usr/local/bin/macake", ConfigDir: r.configDir, StateDir: r.stateDir})
	r.watch = doctor.WatchState{Running: true, PID: 4242, Holder: state.HolderWatch, Via: "the state lock"}
	r.serveDaemonStatus()
}

// doctor runs `macake doctor ARGS` as euid with a UTF-8 locale and returns
// the exit code and stdout with the temporary root replaced by /ROOT.
func (r *doctorRig) doctor(euid int, args ...string) (int, string, string) {
	r.t.Helper()
	r.t.Setenv("LANG", "en_US.UTF-8")
	r.t.Setenv("LC_ALL", "")
	r.t.Setenv("LC_CTYPE", "")
	code, stdout, stderr := r.runAs(euid, append([]string{"doctor"}, args...)...)
	return code, strings.ReplaceAll(stdout, r.root, "/ROOT"), stderr
}

// healthy applies the policy and installs the daemon.
func (r *doctorRig) healthy() {
	r.t.Helper()
	r.mustRun(exitcode.OK, "apply")
	r.installDaemon()
}

func doctorGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "doctor", name), []byte(got), docsShowIt)
}

func TestDoctorHealthyGolden(t *testing.T) {
	r := newDoctorRig(t)
	r.healthy()
	before := len(r.emu.MutatingCalls())
	code, stdout, stderr := r.doctor(0)
	if code != exitcode.OK {
		t.Errorf("exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	doctorGolden(t, "healthy.txt", stdout)
	if !strings.HasSuffix(stdout, "\nEverything looks fine.\n") {
		t.Errorf("no healthy verdict:\n%s", stdout)
	}
	if n := len(r.emu.MutatingCalls()) - before; n != 0 {
		t.Errorf("doctor made %d mutating pfctl/dnctl calls", n)
	}
	if code, _, _ := r.doctor(0, "--strict"); code != exitcode.OK {
		t.Errorf("--strict on a healthy machine: exit %d, want 0", code)
	}
}

func TestDoctorBrokenGolden(t *testing.T) {
	r := newDoctorRig(t)
	r.healthy()
	r.emu.DropHook()
	for _, argv := range [][]string{
		{"dnctl", "pipe", "48997", "config", "bw", "10Mbit/s", "delay", "100"},
		{"dnctl", "pipe", "40269", "config", "bw", "1Mbit/s", "delay", "500"},
		{"dnctl", "pipe", "40270", "config", "bw", "1Mbit/s", "delay", "500"},
	} {
		if _, err := r.emu.Foreign(context.Background(), "", argv...); err != nil {
			t.Fatal(err)
		}
	}
	nlc := "no dummynet quick on lo0 all\ndummynet in quick inet all allow-opts pipe 40269\ndummynet out quick inet all allow-opts pipe 40270\n"
	if _, err := r.emu.Foreign(context.Background(), nlc, "pfctl", "-a", "com.apple.nlc/base", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	r.silent = map[netip.Addr]bool{netip.MustParseAddr("192.0.2.2"): true}
	configtest.Write(t, r.configDir, "lte", configtest.Policy{Interface: "en5", Download: "30mbps"}.TOML()) // an ambiguous unit, refused

	code, stdout, stderr := r.doctor(0)
	if code != exitcode.Failure {
		t.Errorf("exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	doctorGolden(t, "broken.txt", stdout)
}

// TestDoctorExitCodes: problems fail; warnings fail only with --strict;
// usage errors are 64.
func TestDoctorExitCodes(t *testing.T) {
	tests := []struct {
		name         string
		setup        func(r *doctorRig)
		euid         int
		code, strict int
	}{
		{"healthy", func(r *doctorRig) { r.healthy() }, 0, exitcode.OK, exitcode.OK},
		{"warnings only: not installed as a daemon", func(r *doctorRig) { r.mustRun(exitcode.OK, "apply") }, 0, exitcode.OK, exitcode.Failure},
		{"warnings only: not root", func(r *doctorRig) { r.healthy(); r.emu.SetPrivileged(false) }, 501, exitcode.OK, exitcode.Failure},
		{"problem: pf disabled", func(r *doctorRig) { r.healthy(); r.emu.DisablePF() }, 0, exitcode.Failure, exitcode.Failure},
		{"problem: pfctl and dnctl missing", func(r *doctorRig) { r.healthy(); r.emu.SetToolsMissing(true) }, 0, exitcode.Failure, exitcode.Failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newDoctorRig(t)
			tt.setup(r)
			if code, out, _ := r.doctor(tt.euid); code != tt.code {
				t.Errorf("doctor: exit %d, want %d\n%s", code, tt.code, out)
			}
			if code, out, _ := r.doctor(tt.euid, "--strict"); code != tt.strict {
				t.Errorf("doctor --strict: exit %d, want %d\n%s", code, tt.strict, out)
			}
		})
	}
	r := newDoctorRig(t)
	for _, args := range [][]string{{"extra"}, {"--bogus"}, {"--color", "sometimes"}} {
		if code, _, stderr := r.doctor(0, args...); code != exitcode.Usage {
			t.Errorf("doctor %s: exit %d, want 64 (%s)", strings.Join(args, " "), code, stderr)
		}
	}
}

// TestDoctorJSON checks the document's shape: versioned, one entry per
// check with a stable id and a status word, and the verdict.
func TestDoctorJSON(t *testing.T) {
	r := newDoctorRig(t)
	r.healthy()
	r.emu.DisablePF()
	code, stdout, _ := r.doctor(0, "--json", "--strict")
	if code != exitcode.Failure {
		t.Errorf("exit %d, want 1", code)
	}
	var doc struct {
		FormatVersion string `json:"format_version"`
		Strict        bool   `json:"strict"`
		Root          bool   `json:"root"`
		Summary       struct {
			OK, Info, Warnings, Problems, Skipped int
		} `json:"summary"`
		Verdict string `json:"verdict"`
		Failed  bool   `json:"failed"`
		Checks  []struct {
			ID, Section, Name, Status, Message, Fix string
			Details                                 []string
			NeedsRoot                               bool `json:"needs_root"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, stdout)
	}
	if doc.FormatVersion != "1.0" || !doc.Strict || !doc.Root || !doc.Failed || doc.Summary.Problems == 0 || doc.Verdict == "" {
		t.Errorf("document header: %+v", doc)
	}
	ids := map[string]string{}
	for _, c := range doc.Checks {
		ids[c.ID] = c.Status
		switch c.Status {
		case "ok", "info", "warning", "problem", "skipped":
		default:
			t.Errorf("%s: status %q", c.ID, c.Status)
		}
	}
	for _, id := range []string{"system.backend", "pf.pfctl", "pf.hook", "pf.nlc", "net.icmp", "net.reflectors", "net.counters", "config.policies", "config.state", "daemon.installed", "daemon.running"} {
		if _, ok := ids[id]; !ok {
			t.Errorf("no check %s in %v", id, ids)
		}
	}
	if ids["pf.status"] != "problem" {
		t.Errorf("pf.status = %q, want problem", ids["pf.status"])
	}
}

// rootOwnedFS reads launchd's files from memory and everything else from
// disk, reporting root as the owner of the test's own files.
type rootOwnedFS struct{ mem *servicetest.Files }

func (f rootOwnedFS) Stat(path string) (service.FileInfo, error) {
	if fi, err := f.mem.Stat(path); err == nil {
		return fi, nil
	}
	fi, err := service.OSFiles{}.Stat(path)
	fi.UID, fi.GID = 0, 0
	return fi, err
}

func (f rootOwnedFS) ReadFile(path string) ([]byte, error) {
	if b, err := f.mem.ReadFile(path); err == nil {
		return b, nil
	}
	return os.ReadFile(path)
}

// openAll allows every ICMP socket.
type openAll struct{}

func (openAll) Open(string) error { return nil }

// fakeEchoes answers every target in 12.3 ms but the silent ones.
type fakeEchoes struct{ silent map[netip.Addr]bool }

func (f fakeEchoes) Ping(_ context.Context, iface string, probes []shape.Reflector) ([]doctor.Echo, error) {
	var out []doctor.Echo
	for _, t := range shape.ReflectorAddrs(probes) {
		e := doctor.Echo{Target: t, Interface: iface, Sent: 3, Received: 3, RTT: 12300 * time.Microsecond}
		if f.silent[t] {
			e.Received, e.RTT = 0, 0
		}
		out = append(out, e)
	}
	return out, nil
}

// twoReadings is an interface that moved 1 MB down and 100 KB up.
type twoReadings struct{ n int }

func (c *twoReadings) Read(string) (ifstat.Counters, error) {
	c.n++
	if c.n == 1 {
		return ifstat.Counters{RxBytes: 5_000_000, TxBytes: 800_000, RxPackets: 4000, TxPackets: 2000, Index: 4}, nil
	}
	return ifstat.Counters{RxBytes: 6_000_000, TxBytes: 900_000, RxPackets: 4800, TxPackets: 2400, Index: 4}, nil
}

type staticWatch struct{ s doctor.WatchState }

func (w staticWatch) Watch(context.Context, string) (doctor.WatchState, error) { return w.s, nil }
