// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/diag"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/service"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/servicetest"
	"github.com/macake/macake/service/systemd"
	"github.com/macake/macake/state"
)

// expect checks a result's status and that its message, fix and details
// together hold every string in says.
func expect(t *testing.T, r report.Result, status report.Status, says ...string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %s, want %s: %s (fix: %s)", r.Status, status, r.Message, r.Fix)
	}
	if (status == report.Warning || status == report.Problem) && r.Fix == "" {
		t.Errorf("a %s without a fix: %s", status, r.Message)
	}
	text := r.Message + "\n" + r.Fix + "\n" + strings.Join(r.Details, "\n")
	for _, s := range says {
		if !strings.Contains(text, s) {
			t.Errorf("does not say %q:\n%s", s, text)
		}
	}
}

func TestJudgePFStatus(t *testing.T) {
	ref := func(tok string) pfdn.Reference { return pfdn.Reference{PID: 1, Process: "pfctl", Token: tok} }
	tests := []struct {
		name    string
		live    pfdn.Live
		held    string
		shaping bool
		want    report.Status
		says    []string
	}{
		{"disabled while shaping", pfdn.Live{}, "7", true, report.Problem, []string{"pf is disabled, so macake's rules are not in effect", "stale", "sudo macake apply"}},
		{"disabled, nothing to shape", pfdn.Live{}, "", false, report.OK, []string{"pf is disabled; macake enables it"}},
		{"enabled with macake's reference", pfdn.Live{Info: pfdn.Info{Enabled: true, For: 26*time.Hour + 3*time.Minute}, References: []pfdn.Reference{ref("7"), ref("9")}}, "7", true, report.OK,
			[]string{"for 1 days 02:03:00", "macake holds its own reference (1 other reference)"}},
		{"enabled by others while shaping", pfdn.Live{Info: pfdn.Info{Enabled: true}, References: []pfdn.Reference{ref("9")}}, "", true, report.Warning,
			[]string{"enabled by others only (1 reference)", "shaping stops when they release theirs"}},
		{"enabled by others, nothing shaped", pfdn.Live{Info: pfdn.Info{Enabled: true}, References: []pfdn.Reference{ref("9")}}, "", false, report.OK, []string{"by others"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, judgePFStatus(tt.live, tt.held, tt.shaping), tt.want, tt.says...)
		})
	}
}

func TestJudgeHook(t *testing.T) {
	hooked := pfdn.Live{Main: pfdn.RuleList{Exists: true, Rules: []pfdn.Rule{{Action: "dummynet-anchor", Anchor: "com.apple/*", Text: `dummynet-anchor "com.apple/*" all`}}}}
	expect(t, judgeHook(hooked, "com.apple/macake"), report.OK, `dummynet-anchor "com.apple/*"`)
	expect(t, judgeHook(pfdn.Live{}, "com.apple/macake"), report.Problem, "\ndummynet-anchor \"com.apple/*\"", "sudo pfctl -f /etc/pf.conf")
	// An anchor at the top level needs its own line.
	expect(t, judgeHook(hooked, "shaper"), report.Problem, "\ndummynet-anchor \"shaper\"")
}

func TestJudgeDrift(t *testing.T) {
	rate := plan.Op{Link: "wan", Kind: "pipe", Label: `pipe 48002 "wan/download"`, Action: plan.Update, Reason: "bandwidth differs",
		Fields: []plan.Field{{Key: "bandwidth_bits_per_second"}, {Key: "queue_bytes"}}}
	anchor := plan.Op{Link: "wan", Kind: "rules", Label: `anchor "com.apple/macake"`, Action: plan.Create, Reason: "not present"}
	foreign := plan.Warning{Link: "wan", Unshaped: []string{"upload"},
		Message: "wan0 has a root qdisc macake does not own (pfifo 1:), so upload is not shaped; macake never replaces another tool's qdisc"}
	harmless := plan.Warning{Link: "wan", Message: "wan0's ingress hook has other filters that run before macake's redirect"}
	tests := []struct {
		name     string
		ops      []plan.Op
		warnings []plan.Warning
		watch    bool
		want     report.Status
		says     []string
	}{
		{"nothing to do", nil, nil, false, report.OK, []string{"matches the policy files"}},
		{"a warning that leaves shaping in effect", nil, []plan.Warning{harmless}, false, report.OK, []string{"matches the policy files"}},
		{"changes without watch", []plan.Op{anchor, rate}, nil, false, report.Warning, []string{"2 changes pending", `+ anchor "com.apple/macake" (link "wan"): not present`, "sudo macake apply"}},
		{"rates steered by watch", []plan.Op{rate}, nil, true, report.OK, []string{"1 rate steered by macake watch", `~ pipe 48002 "wan/download"`}},
		{"drift while watch runs", []plan.Op{anchor, rate}, nil, true, report.Warning, []string{"1 change pending", "macake watch should repair this"}},
		{"a foreign qdisc in the way, nothing to apply", nil, []plan.Warning{foreign, harmless}, true, report.Warning,
			[]string{`does not match the policy files: link "wan" upload not shaped`, `! link "wan": wan0 has a root qdisc macake does not own (pfifo 1:)`}},
		{"a foreign qdisc in the way and a change", []plan.Op{anchor}, []plan.Warning{foreign}, false, report.Warning,
			[]string{"1 change pending", `! link "wan": wan0 has a root qdisc`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, judgeDrift(plan.Plan{Ops: tt.ops, Warnings: tt.warnings}, tt.watch, config.Invocation{}), tt.want, tt.says...)
			if !tt.watch && tt.want == report.Warning {
				// Followed as printed, the fix acts on the directories
				// this run checked (issue 27, item 10).
				expect(t, judgeDrift(plan.Plan{Ops: tt.ops, Warnings: tt.warnings}, tt.watch, config.Invocation{ConfigDir: "/x", StateDir: "/y"}), tt.want,
					"sudo macake --config-dir /x --state-dir /y apply makes it match (sudo macake --config-dir /x --state-dir /y plan shows")
			}
		})
	}
}

func TestJudgeICMP(t *testing.T) {
	denied := errors.New("socket: permission denied")
	opener := func(fail ...string) func(string) error {
		return func(network string) error {
			for _, f := range fail {
				if f == network {
					return denied
				}
			}
			return nil
		}
	}
	tests := []struct {
		name       string
		goos       string
		euid       int
		groupRange string
		open       func(string) error
		needV6     bool
		want       report.Status
		says       []string
	}{
		{"macOS", "darwin", 501, "", opener(), false, report.OK, []string{"macOS allows them for every user"}},
		{"macOS refuses", "darwin", 501, "", opener("udp4"), false, report.Problem, []string{"cannot open an ICMP socket"}},
		{"Linux group in range", "linux", 1000, "0 2147483647", opener(), false, report.OK, []string{`"0 2147483647" includes this user's group`}},
		{"Linux root, raw only", "linux", 0, "1 0", opener("udp4"), false, report.OK, []string{"raw ICMP sockets open as root", "monitor and measure need sudo", `ping_group_range="0 2147483647"`}},
		{"Linux user outside the range", "linux", 1000, "1 0", opener("udp4", "ip4:icmp"), false, report.Warning, []string{`"1 0" excludes`, "macake watch runs as root and is not affected", `sudo sysctl -w net.ipv4.ping_group_range="0 2147483647"`}},
		{"Linux root without any socket", "linux", 0, "1 0", opener("udp4", "ip4:icmp"), false, report.Problem, []string{"cannot open an ICMP socket", "CAP_NET_RAW"}},
		{"IPv6 reflectors without IPv6 sockets", "darwin", 501, "", opener("udp6"), true, report.Warning, []string{"IPv6 reflectors cannot be probed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, judgeICMP(tt.goos, tt.euid, []int{1000}, tt.groupRange, nil, tt.open, tt.needV6), tt.want, tt.says...)
		})
	}
}

func TestJudgeEchoes(t *testing.T) {
	a, b := mustAddr("192.0.2.1"), mustAddr("2001:db8::1")
	ms := time.Millisecond
	expect(t, judgeEchoes([]Echo{{Target: a, Sent: 3, Received: 3, RTT: 12340 * time.Microsecond}, {Target: b, Sent: 3, Received: 2, RTT: 20 * ms}}), report.OK,
		"2 reflectors answer: 192.0.2.1 12.3ms, 2001:db8::1 20ms", "2001:db8::1: 2/3 replies")
	expect(t, judgeEchoes([]Echo{{Target: a, Sent: 3, Received: 3, RTT: ms}, {Target: b, Sent: 3, Err: "network is unreachable"}}), report.Warning,
		"1 of 2 reflectors do not answer: 2001:db8::1", "0/3 replies (network is unreachable)")
	expect(t, judgeEchoes([]Echo{{Target: a, Sent: 3}}), report.Problem, "none of the 1 reflector answers")
	expect(t, judgeEchoes(nil), report.Info)
}

func TestJudgeCounters(t *testing.T) {
	c := func(rx, tx, rxp, txp uint64) ifstat.Counters {
		return ifstat.Counters{RxBytes: rx, TxBytes: tx, RxPackets: rxp, TxPackets: txp, Index: 3}
	}
	tests := []struct {
		name string
		f    counterFacts
		want report.Status
		says []string
	}{
		{"idle", counterFacts{iface: "en0", first: c(5000, 4000, 50, 40), last: c(5000, 4000, 50, 40), wait: time.Second}, report.OK, []string{"readable (no traffic during 1s)"}},
		{"moving", counterFacts{iface: "en0", first: c(0, 0, 0, 0), last: c(1_500_000, 15_000, 1000, 100), wait: time.Second}, report.OK, []string{"12.0 Mbit/s down, 120 kbit/s up over 1s"}},
		{"stuck now", counterFacts{iface: "en0", first: c(0, 900, 10, 9), last: c(0, 1800, 500, 18), wait: time.Second}, report.Problem, []string{"receive bytes stuck at 0 while 490 packets arrived"}},
		{"stuck since boot", counterFacts{iface: "en0", first: c(0, 900, 5000, 9), last: c(0, 900, 5000, 9), wait: time.Second}, report.Problem, []string{"receive bytes stuck at 0", "since it came up"}},
		{"reset", counterFacts{iface: "en0", first: c(1<<40, 0, 1<<40, 0), last: c(10, 0, 1, 0), wait: time.Second}, report.Warning, []string{"reset between two readings"}},
		{"gone", counterFacts{iface: "en7", err: fmt.Errorf("en7: %w", ifstat.ErrNoInterface)}, report.Problem, []string{"interface en7 has disappeared"}},
		{"unreadable", counterFacts{iface: "en0", err: errors.New("sysctl: bad")}, report.Problem, []string{"cannot read en0's byte counters"}},
		{"rounded", counterFacts{iface: "en0", first: c(1024, 0, 1, 0), last: ifstat.Counters{RxBytes: 1024, RxPackets: 1, Index: 3, Rounded: true}, wait: time.Second}, report.OK, []string{"NET_RT_IFLIST2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { expect(t, judgeCounters(tt.f), tt.want, tt.says...) })
	}
}

func TestJudgeOwnership(t *testing.T) {
	mem := servicetest.NewFiles("/etc/macake/links.d", "/var/db/macake")
	mem.AddFile("/etc/macake/links.d/wan.toml", nil, 0o644, 0, 0)
	paths := []string{"/etc/macake/links.d", "/etc/macake/links.d/wan.toml"}
	expect(t, judgeOwnership(mem, paths, "/var/db/macake"), report.OK, "owned by root")

	mem.Chmod("/var/db/macake", 0o777)
	expect(t, judgeOwnership(mem, paths, "/var/db/macake"), report.Warning, "/var/db/macake: writable by group or others (mode 0777)")

	mem.Chmod("/etc/macake/links.d/wan.toml", 0o664)
	mem.Chown("/etc/macake/links.d", 501, 20)
	expect(t, judgeOwnership(mem, paths, "/var/db/macake"), report.Problem,
		"3 configuration paths can be changed", "/etc/macake/links.d: owned by uid 501", "wan.toml: writable by group or others (mode 0664)", "/var/db/macake: writable")
}

func TestJudgeState(t *testing.T) {
	expect(t, judgeState(stateFacts{path: "/var/db/macake/state.json", err: fs.ErrPermission}, 501, true), report.Warning, "without root", "run with sudo")
	expect(t, judgeState(stateFacts{path: "/s/state.json", err: errors.New("is a directory")}, 0, true), report.Problem, "cannot read /s/state.json")
	expect(t, judgeState(stateFacts{path: "/s/state.json"}, 0, true), report.OK, "no state file yet")
	// Each backend's own words: no pf reference on Linux (issue 27, item 12).
	st := &state.State{TCOwnedRoots: []string{"eth0"}}
	expect(t, judgeState(stateFacts{path: "/s/state.json", exists: true, state: st}, 0, true), report.OK, "0 link slots, 0 measured profiles, no pf reference")
	if r := judgeState(stateFacts{path: "/s/state.json", exists: true, state: st}, 0, false); strings.Contains(r.Message, "pf") || !strings.Contains(r.Message, "1 root qdisc of macake's") {
		t.Errorf("Linux's state file: %q", r.Message)
	}
	if r := judgeState(stateFacts{path: "/s/state.json", corrupt: true, err: errors.New("bad")}, 0, false); strings.Contains(r.Message, "pf") {
		t.Errorf("Linux's corrupt state file: %q", r.Message)
	}
}

func TestJudgeService(t *testing.T) {
	prog := service.Program{Binary: "/opt/macake/bin/macake", ConfigDir: "/etc/macake/links.d", StateDir: "/var/db/macake"}
	mem := servicetest.NewFiles("/opt/macake/bin")
	mem.AddFile(prog.Binary, nil, 0o755, 0, 0)
	running := WatchState{Running: true, PID: 77}
	tests := []struct {
		name string
		s    serviceFacts
		goos string
		w    WatchState
		dirs [2]string
		want report.Status
		says []string
	}{
		{"current", serviceFacts{path: launchd.DaemonPlistPath, prog: prog, same: true}, "darwin", running, [2]string{prog.ConfigDir, prog.StateDir}, report.OK, []string{"runs /opt/macake/bin/macake watch"}},
		{"missing", serviceFacts{path: launchd.DaemonPlistPath, err: fs.ErrNotExist}, "darwin", WatchState{}, [2]string{}, report.Warning, []string{"no LaunchDaemon", "sudo macake install-daemon"}},
		{"missing on Linux", serviceFacts{path: systemd.UnitPath, err: fs.ErrNotExist}, "linux", WatchState{}, [2]string{}, report.Warning, []string{"no systemd unit", "sudo macake install-daemon"}},
		{"missing, watch started by hand", serviceFacts{path: launchd.DaemonPlistPath, err: fs.ErrNotExist}, "darwin", running, [2]string{}, report.Info, []string{"pid 77"}},
		{"not ours", serviceFacts{path: launchd.DaemonPlistPath, progErr: errors.New(`it runs "x"`)}, "darwin", running, [2]string{}, report.Warning, []string{"was not written by this macake"}},
		{"binary gone", serviceFacts{path: launchd.DaemonPlistPath, prog: service.Program{Binary: "/gone/macake", ConfigDir: "/c", StateDir: "/s"}, same: true}, "darwin", running, [2]string{"/c", "/s"}, report.Problem, []string{"/gone/macake, which is not an executable file"}},
		{"other directories", serviceFacts{path: launchd.DaemonPlistPath, prog: prog, same: true}, "darwin", running, [2]string{"/tmp/links.d", prog.StateDir}, report.Warning, []string{"this run checked /tmp/links.d", "macake --config-dir /etc/macake/links.d --state-dir /var/db/macake doctor"}},
		{"edited", serviceFacts{path: launchd.DaemonPlistPath, prog: prog}, "darwin", running, [2]string{prog.ConfigDir, prog.StateDir}, report.Warning, []string{"owner (root:wheel) or mode (0644)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, judgeService(tt.s, tt.goos, mem, tt.w, tt.dirs[0], tt.dirs[1], config.Invocation{}), tt.want, tt.says...)
			if tt.name == "missing on Linux" {
				// Followed as printed, the fix installs the service for
				// the directories this run checked (issue 27, item 10).
				expect(t, judgeService(tt.s, tt.goos, mem, tt.w, "/x", "/y", config.Invocation{ConfigDir: "/x", StateDir: "/y"}), tt.want,
					"sudo macake --config-dir /x --state-dir /y install-daemon")
			}
		})
	}
}

func TestJudgeLaunchdPrint(t *testing.T) {
	running := "system/org.macake.watch = {\n\tactive count = 1\n\tstate = running\n\tpid = 412\n\tlast exit code = (never exited)\n}\n"
	expect(t, judgeLaunchdPrint(running, watchFacts{}), report.OK, "launchd runs org.macake.watch (pid 412)")
	crashed := "system/org.macake.watch = {\n\tstate = not running\n\tlast exit code = 78: EX_CONFIG\n}\n"
	expect(t, judgeLaunchdPrint(crashed, watchFacts{}), report.Problem, "loaded but not running; last exit code 78: EX_CONFIG", "/var/log/macake/watch.log", "/var/log/macake/watch.stderr.log")
	expect(t, judgeLaunchdPrint("system/org.macake.watch = {\n\tstate = not running\n\tlast exit code = 78\n}\n", watchFacts{}), report.Problem, "configuration is invalid")
	expect(t, judgeLaunchdPrint("something new\n", watchFacts{state: WatchState{Running: true, PID: 9}}), report.OK, "holds the state lock (pid 9)")
	expect(t, judgeLaunchdPrint("something new\n", watchFacts{}), report.Info, "could not be read")
}

func TestJudgeWatchLinux(t *testing.T) {
	unit := serviceFacts{path: systemd.UnitPath}
	expect(t, judgeWatchLinux(unit, watchFacts{state: WatchState{Running: true, PID: 5, Via: "the state lock"}}), report.OK, "pid 5, found through the state lock")
	r := judgeWatchLinux(unit, watchFacts{state: WatchState{PID: 6}})
	expect(t, r, report.Problem, "macake-watch.service is installed but macake watch is not running", "journalctl -u macake-watch", "pid 6 (a one-shot macake command)")
	expect(t, judgeWatchLinux(unit, watchFacts{err: fs.ErrPermission}), report.Warning, "cannot tell")
	if r := judgeWatchLinux(serviceFacts{path: systemd.UnitPath, err: fs.ErrNotExist}, watchFacts{}); r.Status != report.Skipped {
		t.Errorf("no unit, no watch: %s, want skipped", r.Status)
	}
}

// TestSystemdService reads an installed unit back: the program it runs
// (paths with spaces included) and whether it is current.
func TestSystemdService(t *testing.T) {
	prog := service.Program{Binary: "/opt/my tools/macake", ConfigDir: "/etc/macake/links.d", StateDir: "/var/lib/macake 100%"}
	unit, err := systemd.WatchUnit(prog)
	if err != nil {
		t.Fatal(err)
	}
	mem := servicetest.NewFiles("/etc/systemd/system")
	mem.AddFile(systemd.UnitPath, unit, 0o644, 0, 0)
	in := NewInspection(System{GOOS: "linux", FS: mem})
	s := in.systemdService()
	if s.err != nil || s.progErr != nil || s.prog != prog || !s.same {
		t.Fatalf("systemdService() = %+v, want program %+v and same", s, prog)
	}
	mem.AddFile(systemd.UnitPath, []byte(strings.Replace(string(unit), "RestartSec=30", "RestartSec=1", 1)), 0o644, 0, 0)
	if s := in.systemdService(); s.same || s.prog != prog {
		t.Errorf("edited unit: same=%v prog=%+v", s.same, s.prog)
	}
}

func TestJudgeTCKernel(t *testing.T) {
	all := tc.Capabilities{Cake: true, Prio: true, HTB: true, BFIFO: true, Ingress: true, U32: true, Mirred: true, IFB: true, Method: "tried in a throwaway network namespace", Tried: true}
	noCake := all
	noCake.Cake = false
	noIFB := noCake
	noIFB.IFB = false
	nothing := tc.Capabilities{Method: "assumed"}
	expect(t, judgeTCKernel(all, nil), report.OK, "both directions shape with cake", "sch_cake available")
	expect(t, judgeTCKernel(noCake, nil), report.OK, "sch_cake not available: falling back to htb+bfifo, which shapes both directions")
	expect(t, judgeTCKernel(noCake, []string{"router"}), report.Warning, "[cake] options of router are not applied", "modprobe sch_cake")
	expect(t, judgeTCKernel(noIFB, nil), report.Warning, "upload only", "modprobe ifb")
	expect(t, judgeTCKernel(nothing, nil), report.Problem, "cannot shape")
}

// answer is what a fake command returns.
type answer struct {
	res execrun.Result
	err error
}

// fakeRunner answers commands by program name.
type fakeRunner map[string]answer

func (f fakeRunner) Run(_ context.Context, cmd execrun.Command) (execrun.Result, error) {
	name := cmd.Argv[0][strings.LastIndexByte(cmd.Argv[0], '/')+1:]
	a, known := f[name]
	if !known {
		return execrun.Result{ExitCode: -1}, &fs.PathError{Op: "fork/exec", Path: cmd.Argv[0], Err: syscall.ENOENT}
	}
	return a.res, a.err
}

func TestToolResult(t *testing.T) {
	run := func(r fakeRunner) toolState {
		return runTool(context.Background(), r, "dnctl", pfdn.EnvDnctl, "/usr/sbin/dnctl", "list")
	}
	expect(t, toolResult(run(fakeRunner{"dnctl": answer{}}), "install it"), report.OK, "/usr/sbin/dnctl runs")
	expect(t, toolResult(run(fakeRunner{}), "install it"), report.Problem, "no such file or directory", "install it; MACAKE_DNCTL overrides the path")
	expect(t, toolResult(run(fakeRunner{"dnctl": answer{res: execrun.Result{ExitCode: 69, Stderr: []byte("dnctl: socket: Operation not permitted\n")}}}), "install it"), report.OK, "needs root")
	expect(t, toolResult(run(fakeRunner{"dnctl": answer{res: execrun.Result{ExitCode: 70, Stderr: []byte("dnctl: kaputt\n")}}}), "install it"), report.Problem, "exit status 70", "dnctl: kaputt")
	expect(t, toolResult(run(fakeRunner{"dnctl": answer{err: errors.New("timed out after 10s")}}), "install it"), report.Problem, "timed out")
}

// TestTCChecks runs the Linux checks with a fake runner and fake kernel
// capabilities.
func TestTCChecks(t *testing.T) {
	m := newFakeMac(t, map[string]string{"router": configtest.Policy{Interface: "eth0", Download: "100mbit", Upload: "10mbit", More: "[cake]\nnat = true\n"}.TOML()})
	sys := m.system()
	sys.GOOS, sys.OSVersion = "linux", "Linux 6.12.0"
	sys.Getenv = func(k string) string { return map[string]string{"MACAKE_BACKEND": "tc"}[k] }
	sys.Runner = fakeRunner{"tc": answer{}, "ip": answer{}}
	sys.TCCapabilities = func(context.Context) tc.Capabilities {
		return tc.Capabilities{HTB: true, BFIFO: true, Ingress: true, U32: true, Mirred: true, IFB: true, Method: "read from /proc/config.gz"}
	}
	rep := Run(context.Background(), NewInspection(sys), Checks)
	expect(t, result(t, rep, "tc.tools"), report.OK, "tc and", "ip run")
	expect(t, result(t, rep, "tc.kernel"), report.Warning, "[cake] options of router are not applied")
	for _, r := range rep.Results {
		if strings.HasPrefix(r.ID, "pf.") {
			t.Errorf("%s ran on the tc backend", r.ID)
		}
	}
	sys.Runner = fakeRunner{"ip": answer{}}
	rep = Run(context.Background(), NewInspection(sys), Checks)
	expect(t, result(t, rep, "tc.tools"), report.Problem, "install iproute2")
}

func TestSystemChecks(t *testing.T) {
	in := NewInspection(System{GOOS: "plan9", GOARCH: "amd64"})
	expect(t, checkOS(context.Background(), in), report.Problem, "plan9 (plan9/amd64): macake cannot shape")
	in = NewInspection(System{GOOS: "darwin", Getenv: func(k string) string { return map[string]string{"MACAKE_BACKEND": "ipfw"}[k] }, FS: servicetest.NewFiles()})
	expect(t, checkBackend(context.Background(), in), report.Problem, `MACAKE_BACKEND="ipfw": unknown backend`)
	expect(t, checkUser(context.Background(), NewInspection(System{EUID: 501})), report.Info, "uid 501, not root")
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestJudgeLinks(t *testing.T) {
	wan := config.Link{Name: "wan", Policy: config.Policy{Match: config.MatchKeys{Interface: "en0"}}}
	def := linkfacts.InterfaceFacts{Name: "en0", Up: true, GatewayIP: mustAddr("192.168.1.1"), Default: true}
	expect(t, judgeLinks(linkFacts{def: def, hasDefault: true, selection: desired.Selection{Active: []config.Link{wan}}}, 1), report.OK,
		"default route via en0 (gateway 192.168.1.1); active: wan on en0")
	expect(t, judgeLinks(linkFacts{def: def, hasDefault: true, selection: desired.Selection{Verdicts: []desired.Verdict{{Name: "lte", Interface: "en5", Reason: "interface en5 is down"}}}}, 1), report.Info,
		"no policy matches this network", "lte (en5): interface en5 is down")
	expect(t, judgeLinks(linkFacts{def: def, hasDefault: true}, 0), report.Info, "no policy files")
	// The example's eth0 copied to a machine whose port has another name.
	expect(t, judgeLinks(linkFacts{def: def, hasDefault: true, facts: linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{def}},
		selection: desired.Selection{Verdicts: []desired.Verdict{{Name: "router", Interface: "eth9", Reason: "interface eth9 not present"}}}}, 1), report.Warning,
		"router names eth9, which this machine does not have")
	expect(t, judgeLinks(linkFacts{}, 1), report.Warning, "no default route: not connected")
}

// TestConfigChecks judges the configuration as apply reads it.
func TestConfigChecks(t *testing.T) {
	run := func(m *fakeMac) report.Report { return m.run() }
	m := newFakeMac(t, nil)
	os.Remove(m.configDir)
	rep := run(m)
	// The fix names no file of a source tree the user does not have
	// (issue 27, item 13).
	expect(t, result(t, rep, "config.policies"), report.Warning, "no policy directory", "sudo macake --config-dir "+m.configDir+" init writes a policy", "https://github.com/macake/macake/blob/main/docs/CONFIG.md")
	expect(t, result(t, rep, "config.ownership"), report.OK, "no configuration files")

	m = newFakeMac(t, nil)
	expect(t, result(t, run(m), "config.policies"), report.Warning, "no policy files (*.toml)")

	// The bufferbloat window outlasts cut_refractory: valid, with a warning.
	m = newFakeMac(t, map[string]string{"wan": strings.Replace(wanPolicy, `cut_refractory = "1s"`, "", 1)})
	expect(t, result(t, run(m), "config.policies"), report.Warning, "1 policy valid (wan), with 1 warning", "cut_refractory")

	// Several valid policies are counted in plain English.
	m = newFakeMac(t, map[string]string{"wan": wanPolicy, "wan2": strings.Replace(wanPolicy, `"en0"`, `"en7"`, 1)})
	expect(t, result(t, run(m), "config.policies"), report.OK, "2 policies valid: wan, wan2")

	m = newFakeMac(t, map[string]string{"wan": wanPolicy})
	settings := filepath.Join(filepath.Dir(m.configDir), "macake.toml")
	if err := os.WriteFile(settings, []byte("anchor = \"com.apple/shaper\"\npipe_range = { first = 50001, last = 50100 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep = run(m)
	expect(t, result(t, rep, "config.settings"), report.OK, settings+` is valid (anchor "com.apple/shaper", pipes 50001-50100`)
	expect(t, result(t, rep, "system.backend"), report.OK, `pf anchor "com.apple/shaper", dummynet pipes 50001-50100`)
	expect(t, result(t, rep, "pf.hook"), report.OK, `evaluates the anchor "com.apple/shaper"`)
}

func TestJudgeDaemonStatus(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := statusapi.Status{Daemon: statusapi.Daemon{Running: true, PID: 7}}
	expect(t, judgeDaemonStatus(st, now, "LOGS"), report.Info, "macake watch (pid 7) answers; it has not reconciled yet")
	st.LastApply = &statusapi.Apply{At: now.Add(-26 * time.Hour), Trigger: "config", Result: "applied", Created: 1, Updated: 2}
	st.Problems = diag.Messages([]string{"pf.conf lacks the hook line dummynet-anchor \"com.apple/*\""})
	expect(t, judgeDaemonStatus(st, now, "LOGS"), report.Warning,
		"its last reconcile (config, 26h ago): 1 created, 2 updated, 0 removed", "1 problem keep shaping", "hook line", "macake status")
	st.ConfigErrors = []statusapi.ConfigError{{Diagnostic: diag.Diagnostic{File: "a.toml", Line: 1, Column: 2, Message: "bad"}}}
	expect(t, judgeDaemonStatus(st, now, "LOGS"), report.Warning, "a.toml:1:2: bad (nothing of it is in force)", "macake validate")
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n          int
		noun, want string
	}{
		{1, "policy", "1 policy"}, {4, "policy", "4 policies"}, {0, "policy file", "0 policy files"},
		{2, "problem", "2 problems"}, {3, "dummynet rule", "3 dummynet rules"}, {2, "key", "2 keys"},
	} {
		if got := english.Plural(c.n, c.noun); got != c.want {
			t.Errorf("english.Plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}

func TestRoundAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 1400 * time.Millisecond: "1s", time.Minute: "1m", 250 * time.Second: "4m10s",
		3 * time.Hour: "3h", 125 * time.Minute: "2h5m", 76 * time.Hour: "3d4h", 72 * time.Hour: "3d",
	} {
		if got := roundAge(d); got != want {
			t.Errorf("roundAge(%v) = %q, want %q", d, got, want)
		}
	}
}
