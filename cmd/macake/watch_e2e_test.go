// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/internal/safefile"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/state"
)

// The tests in this file run `macake watch` as a real process against the
// pf/dummynet emulator's binaries, with a temporary config directory and
// a MACAKE_LINK_FACTS file, and check the emulated Mac after each step.
// Policies probe loopback reflectors (127.0.0.x) only. Waits are bounded
// polls of the emulator's state file, never fixed sleeps.

var (
	e2eBuild     sync.Once
	e2eBinDir    string
	e2eMacake    string
	e2eEmulator  pfdntest.Binaries
	e2eBuildFail string
)

// e2eBinaries builds macake and the emulator once per test binary.
func e2eBinaries(t *testing.T) (string, pfdntest.Binaries) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds binaries; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("watch needs root (it checks, as on a Mac); run the tests as root, as CI does")
	}
	e2eBuild.Do(func() {
		dir, err := os.MkdirTemp("", "macake-watch-e2e-")
		if err != nil {
			e2eBuildFail = err.Error()
			return
		}
		e2eBinDir = dir
		e2eEmulator = pfdntest.BuildBinaries(t, dir)
		e2eMacake = buildMacake(t, dir)
	})
	if e2eBuildFail != "" || e2eMacake == "" {
		t.Fatalf("building the binaries failed earlier: %s", e2eBuildFail)
	}
	return e2eMacake, e2eEmulator
}

func TestMain(m *testing.M) {
	code := m.Run()
	if e2eBinDir != "" {
		os.RemoveAll(e2eBinDir)
	}
	os.Exit(code)
}

// mac is one emulated Mac with a config directory, a state directory and
// a link facts file, on which macake commands and watch run.
type e2eMac struct {
	t         *testing.T
	bin       string
	dir       string
	configDir string
	stateDir  string
	facts     string
	emuState  string
	env       []string
}

func newE2EMac(t *testing.T) *e2eMac {
	t.Helper()
	bin, emu := e2eBinaries(t)
	dir := t.TempDir()
	m := &e2eMac{
		t: t, bin: bin, dir: dir, configDir: filepath.Join(dir, "links.d"), stateDir: filepath.Join(dir, "state"),
		facts: filepath.Join(dir, "facts.json"), emuState: filepath.Join(dir, "emulator.json"),
	}
	if err := os.Mkdir(m.configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m.stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.setFacts("74:24:9f:00:00:01")
	m.env = append(os.Environ(), "LC_ALL=C", "NO_COLOR=1", linkfacts.EnvFile+"="+m.facts)
	m.env = append(m.env, emu.Env(m.emuState)...)
	return m
}

// setFacts rewrites the link facts: en0 up behind a gateway with mac.
func (m *e2eMac) setFacts(mac string) {
	m.t.Helper()
	b := fmt.Sprintf(`{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":%q}]}`, mac)
	if err := safefile.WriteAtomic(m.facts, []byte(b), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// write saves a policy file the way editors do: a temporary file renamed
// over the old one.
func (m *e2eMac) write(name, text string) time.Time {
	m.t.Helper()
	if err := safefile.WriteAtomic(filepath.Join(m.configDir, name+".toml"), []byte(text), 0o644); err != nil {
		m.t.Fatal(err)
	}
	return time.Now()
}

// run runs one macake command to completion.
func (m *e2eMac) run(args ...string) (int, string, string) {
	m.t.Helper()
	cmd := exec.Command(m.bin, append([]string{"--config-dir", m.configDir, "--state-dir", m.stateDir}, args...)...)
	cmd.Env = m.env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		m.t.Fatalf("macake %v: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// emu reads the emulated Mac.
func (m *e2eMac) emu() *pfdntest.Emulator {
	m.t.Helper()
	e, err := pfdntest.LoadFile(m.emuState)
	if err != nil {
		m.t.Fatal(err)
	}
	return e
}

// fault changes the emulated Mac as another tool would.
func (m *e2eMac) fault(f func(e *pfdntest.Emulator)) {
	m.t.Helper()
	if err := pfdntest.UpdateFile(m.emuState, func(e *pfdntest.Emulator) error { f(e); return nil }); err != nil {
		m.t.Fatal(err)
	}
}

// pipes maps each pipe in macake's range to its rate in bit/s.
func (m *e2eMac) pipes() map[int]int64 {
	out := map[int]int64{}
	for _, p := range m.emu().Machine().Dummynet.Pipes {
		if p.Number >= 48001 && p.Number <= 48998 {
			out[int(p.Number)] = int64(p.Bandwidth)
		}
	}
	return out
}

func (m *e2eMac) anchor() string { return m.emu().Snapshot().Rulesets["com.apple/macake"] }

// eventually polls cond every 20 ms for up to 15 s.
func (m *e2eMac) eventually(what string, cond func() bool) {
	m.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			m.t.Fatalf("timed out waiting for %s\nemulator:\n%s\nlog:\n%s", what, m.emu().Snapshot(), m.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *e2eMac) log() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "watch.log"))
	return string(b)
}

// status asks `macake status --json`.
func (m *e2eMac) status() statusapi.Status {
	m.t.Helper()
	code, stdout, stderr := m.run("status", "--json")
	if code != 0 {
		m.t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	var st statusapi.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		m.t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	return st
}

// watchProc is a running `macake watch`.
type watchProc struct {
	m    *e2eMac
	cmd  *exec.Cmd
	done chan struct{}
	code int
}

// startWatch starts watch (in its own process group, so a test can kill
// it with its children) and waits for its first reconcile.
func (m *e2eMac) startWatch(args ...string) *watchProc {
	m.t.Helper()
	return m.startWatchWith(append([]string{"--drift-interval", "250ms"}, args...)...)
}

// startWatchWith is startWatch with only the given flags.
func (m *e2eMac) startWatchWith(args ...string) *watchProc {
	m.t.Helper()
	argv := append([]string{"--config-dir", m.configDir, "--state-dir", m.stateDir, "watch",
		"--log-file", filepath.Join(m.dir, "watch.log")}, args...)
	cmd := exec.Command(m.bin, argv...)
	cmd.Env = m.env
	stderr, err := os.OpenFile(filepath.Join(m.dir, "watch.stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		m.t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	p := &watchProc{m: m, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	m.t.Cleanup(func() { p.kill() })
	m.eventually("watch's first reconcile", func() bool {
		select {
		case <-p.done:
			b, _ := os.ReadFile(filepath.Join(m.dir, "watch.stderr"))
			m.t.Fatalf("watch exited %d at start:\n%s%s", p.code, b, m.log())
		default:
		}
		st, err := statusapi.Fetch(context.Background(), statusapi.SocketPath(m.stateDir))
		return err == nil && st.Daemon.PID == cmd.Process.Pid && st.LastApply != nil
	})
	return p
}

// stop sends sig and waits for the exit status.
func (p *watchProc) stop(sig syscall.Signal) int {
	p.m.t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.code
	case <-time.After(10 * time.Second):
		p.kill()
		p.m.t.Fatalf("watch did not stop within 10 s of %v\n%s", sig, p.m.log())
	}
	return -1
}

// kill kills watch's whole process group (a hung pfctl child included).
func (p *watchProc) kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// oneReflector is an [autorate] table probing one loopback reflector.
const oneReflector = "[autorate]\nreflectors = [\"127.0.0.2\"]\nactive_reflectors = 1\n"

// e2eFixed is a fixed policy on en0 at download, and 5 Mbit/s up.
func e2eFixed(download string) string {
	return configtest.Policy{Interface: "en0", Mode: "fixed", Download: download, Upload: "5mbit", More: oneReflector}.TOML()
}

// TestWatchE2EPolicyEditsAndDrift runs watch through a day in the life of
// a config directory and a Mac that other tools touch: edits are applied,
// a broken edit keeps the last good policy (and says where the error is),
// the fix is applied, each kind of drift is repaired or reported, a
// deleted file removes its link, SIGHUP reopens the log, SIGTERM exits 0.
func TestWatchE2EPolicyEditsAndDrift(t *testing.T) {
	m := newE2EMac(t)
	m.write("cable", e2eFixed("50mbit"))
	w := m.startWatch()
	if got := m.pipes(); got[48001] != 5_000_000 || got[48002] != 50_000_000 {
		t.Fatalf("pipes after start: %v", got)
	}
	st := m.status()
	if !st.Daemon.Running || len(st.Links) != 1 || st.Links[0].Name != "cable" || len(st.Links[0].Shapers) != 2 {
		t.Fatalf("status: %+v", st)
	}
	if code, _, stderr := m.run("apply"); code != exitcode.Failure || !strings.Contains(stderr, "macake watch (pid") {
		t.Errorf("apply while watch runs: exit %d, want 1 naming the daemon:\n%s", code, stderr)
	}

	saved := m.write("cable", e2eFixed("60mbit"))
	m.eventually("the edit applied", func() bool { return m.pipes()[48002] == 60_000_000 })
	t.Logf("file save to applied change: %v", time.Since(saved).Round(time.Millisecond))

	m.write("cable", e2eFixed("70mbps"))
	m.eventually("the config error in status", func() bool { return len(m.status().ConfigErrors) > 0 })
	if got := m.pipes()[48002]; got != 60_000_000 {
		t.Fatalf("a broken edit moved the pipe to %d; the last good policy must stay", got)
	}
	st = m.status()
	if len(st.ConfigErrors) != 1 || st.ConfigErrors[0].Line != 5 || st.ConfigErrors[0].Kept != "last_good" {
		t.Fatalf("config errors in status: %+v", st.ConfigErrors)
	}
	if !strings.Contains(m.log(), "event=config_error") || !strings.Contains(m.log(), "line=5") {
		t.Errorf("the error is not logged with its position:\n%s", m.log())
	}
	_, text, _ := m.run("status")
	if !strings.Contains(text, "cable.toml:5:") || !strings.Contains(text, "its last good policy stays in force") {
		t.Errorf("status does not show the error in force:\n%s", text)
	}
	m.write("cable", e2eFixed("70mbit"))
	m.eventually("the fix applied", func() bool { return m.pipes()[48002] == 70_000_000 })

	repaired := func(kind string) func() bool {
		n := strings.Count(m.log(), "kind="+kind)
		return func() bool { return strings.Count(m.log(), "kind="+kind) > n }
	}
	for _, f := range []struct {
		kind string
		do   func(e *pfdntest.Emulator)
		ok   func() bool
	}{
		{"rules_missing", func(e *pfdntest.Emulator) { e.DeleteAnchor("com.apple/macake") }, func() bool { return strings.Contains(m.anchor(), "pipe 48002") }},
		{"shaper_missing", func(e *pfdntest.Emulator) { e.DeletePipe(48002) }, func() bool { return m.pipes()[48002] == 70_000_000 }},
		{"pf_disabled", func(e *pfdntest.Emulator) { e.DisablePF() }, func() bool { return m.emu().Snapshot().PFEnabled }},
	} {
		logged := repaired(f.kind)
		m.fault(f.do)
		m.eventually(f.kind+" repaired", func() bool { return logged() && f.ok() })
	}

	// The hook line gone: reported with the line to add, nothing applied.
	logged := repaired("hook_missing")
	m.fault(func(e *pfdntest.Emulator) { e.DropHook() })
	m.eventually("the missing hook reported", logged)
	if !strings.Contains(m.log(), `dummynet-anchor \"com.apple/*\"`) {
		t.Errorf("the report does not give the line to add:\n%s", m.log())
	}
	if st := m.status(); len(st.Problems) == 0 || !strings.Contains(st.Problems[0].Message, `dummynet-anchor "com.apple/*"`) {
		t.Errorf("status problems: %q", st.Problems)
	}
	m.fault(func(e *pfdntest.Emulator) {
		e.Foreign(context.Background(), "scrub-anchor \"com.apple/*\"\nnat-anchor \"com.apple/*\"\nrdr-anchor \"com.apple/*\"\ndummynet-anchor \"com.apple/*\"\nanchor \"com.apple/*\"\n", "/sbin/pfctl", "-f", "-")
	})
	m.eventually("the hook's return noticed", func() bool { return len(m.status().Problems) == 0 })

	w.cmd.Process.Signal(syscall.SIGHUP)
	m.eventually("the log reopened", func() bool { return strings.Contains(m.log(), "log file reopened") })

	os.Remove(filepath.Join(m.configDir, "cable.toml"))
	m.eventually("the deleted file's link removed", func() bool {
		s := m.emu().Snapshot()
		return len(m.pipes()) == 0 && m.anchor() == "" && s.RefCount == 0
	})
	if code := w.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("watch exited %d after SIGTERM", code)
	}
}

// TestWatchE2ERestartAndCrash: SIGTERM leaves shaping in place and a
// restart converges without duplicating anything; a watch killed with -9
// while an apply hangs leaves a state that `down` cleans up completely.
func TestWatchE2ERestartAndCrash(t *testing.T) {
	m := newE2EMac(t)
	m.write("cable", e2eFixed("50mbit"))
	w := m.startWatch()
	shaped := m.emu().Snapshot().String()
	if code := w.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("watch exited %d after SIGTERM", code)
	}
	if got := m.emu().Snapshot().String(); got != shaped {
		t.Fatalf("SIGTERM changed the shaping:\n%s\nwant:\n%s", got, shaped)
	}
	if _, err := os.Stat(statusapi.SocketPath(m.stateDir)); !os.IsNotExist(err) {
		t.Errorf("the status socket is left behind after a clean stop: %v", err)
	}
	w = m.startWatch()
	if a := m.status().LastApply; a.Trigger != "start" || a.Result != "no_changes" {
		t.Errorf("the restart's first reconcile: %+v, want no changes", a)
	}
	if got := m.emu().Snapshot().String(); got != shaped {
		t.Fatalf("after the restart:\n%s\nwant:\n%s", got, shaped)
	}
	w.stop(syscall.SIGINT)

	// A fresh Mac, and an apply that hangs at pf's enable reference: the
	// pipes and rules are in, the reference is being taken.
	m2 := newE2EMac(t)
	m2.write("cable", e2eFixed("50mbit"))
	m2.fault(func(e *pfdntest.Emulator) {
		e.AddFault(pfdntest.Fault{Match: `^pfctl -E$`, Kind: pfdntest.Hang})
	})
	cmd := exec.Command(m2.bin, "--config-dir", m2.configDir, "--state-dir", m2.stateDir, "watch", "--log-file", filepath.Join(m2.dir, "watch.log"))
	cmd.Env = m2.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	m2.eventually("the apply hanging at pfctl -E", func() bool {
		return slices.ContainsFunc(m2.emu().Calls(), func(c pfdntest.Call) bool { return strings.HasSuffix(strings.Join(c.Argv, " "), "pfctl -E") })
	})
	if len(m2.pipes()) == 0 {
		t.Fatal("the pipes should be in before the reference")
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // watch and its hung pfctl
	cmd.Wait()
	m2.fault(func(e *pfdntest.Emulator) { e.ClearFaults() })
	if st := m2.status(); st.Daemon.Running {
		t.Errorf("status after kill -9 says the daemon runs")
	}
	if code, stdout, stderr := m2.run("down"); code != 0 {
		t.Fatalf("down after the crash: exit %d\n%s%s", code, stdout, stderr)
	}
	s := m2.emu().Snapshot()
	if len(m2.pipes()) != 0 || m2.anchor() != "" || slices.ContainsFunc(s.References, func(r string) bool { return strings.HasSuffix(r, "pfctl") }) {
		t.Fatalf("down left owned objects:\n%s", s)
	}
}

// e2eAutorate is an autorate policy on en0 behind the gateway mac,
// starting at download and 5 Mbit/s up.
func e2eAutorate(mac, download string) string {
	return configtest.Policy{Interface: "en0", GatewayMAC: mac, Download: download, Upload: "5mbit",
		More: oneReflector + "download = { min = \"1mbit\", max = \"100mbit\" }\nupload = { min = \"1mbit\", max = \"10mbit\" }\n"}.TOML()
}

// TestWatchE2ELinkSwitch rewrites the MACAKE_LINK_FACTS file under a
// running watch, as a move to another network: the old link's pipes and
// rules go, and the new link's pipes are created at the known-good rate
// the state file holds for that network.
func TestWatchE2ELinkSwitch(t *testing.T) {
	m := newE2EMac(t)
	m.write("home", e2eAutorate("74:24:9f:00:00:01", "50mbit"))
	m.write("hotel", e2eAutorate("02:00:00:00:00:02", "20mbit"))
	err := state.Save(m.stateDir, &state.State{Profiles: map[string]state.Profile{
		state.ProfileKey("hotel", "02:00:00:00:00:02"): {Link: "hotel", GoodDownload: 13_000_000, GoodUpload: 3_000_000},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := m.startWatch()
	if got := m.pipes(); len(got) != 2 || got[48002] == 0 {
		t.Fatalf("home is not shaped: %v", got)
	}
	m.setFacts("02:00:00:00:00:02")
	m.eventually("the switch to hotel", func() bool {
		got := m.pipes()
		_, home := got[48002]
		_, hotel := got[48004]
		return !home && hotel && strings.Contains(m.anchor(), "pipe 48004") && !strings.Contains(m.anchor(), "pipe 48002")
	})
	var created []string
	for _, c := range m.emu().Calls() {
		// A plan's pipes come as the lines of one `dnctl /dev/stdin`.
		cmds := []string{strings.Join(c.Argv[1:], " ")}
		if c.Argv[len(c.Argv)-1] == "/dev/stdin" {
			cmds = strings.Split(c.Stdin, "\n")
		}
		for _, s := range cmds {
			if strings.HasPrefix(s, "pipe 48004 config") || strings.HasPrefix(s, "pipe 48003 config") {
				created = append(created, s)
			}
		}
	}
	if len(created) < 2 || !strings.HasPrefix(created[0], "pipe 48003 config bw 3000Kbit/s") || !strings.HasPrefix(created[1], "pipe 48004 config bw 13000Kbit/s") {
		t.Errorf("hotel's pipes were created with %q, want its known-good 3 and 13 Mbit/s", created)
	}
	if !strings.Contains(m.log(), "event=link_change interface=en0 from=home to=hotel") {
		t.Errorf("the link change is not logged:\n%s", m.log())
	}
	w.stop(syscall.SIGTERM)
}

// TestWatchE2EMeasureHandsTheProfileToWatch: with watch running (and so
// holding the state lock), a real `macake measure` process does not write
// the state file behind the daemon's back: it hands the profile to watch
// over the socket, watch saves it and shapes the "auto" link with it at
// once, and the profile is in the state file after watch stops.
func TestWatchE2EMeasureHandsTheProfileToWatch(t *testing.T) {
	m := newE2EMac(t)
	// Everything on loopback: the gateway measure probes, the reflector
	// and the speed-test server.
	os.WriteFile(m.facts, []byte(`{"interfaces":[{"name":"lo","up":true,"gateway_ip":"127.0.0.1","gateway_mac":"02:00:00:00:00:01"}]}`), 0o644)
	m.write("lab", configtest.Policy{Interface: "lo", Mode: "fixed", Download: "auto", Upload: "5mbit", More: oneReflector}.TOML())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: speedtest.Handler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	w := m.startWatch()
	if st := m.status(); len(st.Links) != 1 || st.Links[0].Error == nil || !strings.Contains(st.Links[0].Error.Message, "macake measure") {
		t.Fatalf("before measuring, status should say the link needs a measurement: %+v", st.Links)
	}
	code, stdout, stderr := m.run("measure", "--link", "lab", "--server", "http://"+ln.Addr().String(), "--reflector", "127.0.0.1",
		"--idle", "1s", "--duration", "2s", "--streams", "2", "--no-networkquality", "--json")
	if code != exitcode.OK {
		t.Fatalf("measure: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep measure.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || !rep.Saved || !rep.SavedByWatch {
		t.Fatalf("measure report: %v\n%s", err, stdout)
	}
	// 95 % of the measurement, within dummynet's highest rate (loopback
	// measures tens of Gbit/s).
	want := min(rep.Download.BitsPerSecond*95/100, 2_147_000_000)
	m.eventually("the link shaped at 95 % of the measurement", func() bool {
		got := m.pipes()[48002]
		return got > 0 && got >= want-want/100 && got <= want+want/100
	})
	if !strings.Contains(m.log(), "took in a measurement") {
		t.Errorf("watch did not log the measurement:\n%s", m.log())
	}
	w.stop(syscall.SIGTERM)
	st, err := state.Load(m.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Profiles[rep.ProfileKey]; p.DownloadCapacity != rep.Download.BitsPerSecond || p.UploadCapacity != rep.Upload.BitsPerSecond || p.MeasuredAt.IsZero() {
		t.Errorf("state file profile %q after watch stopped: %+v; want the measurement", rep.ProfileKey, p)
	}
}
