// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/diag"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/state"
)

// TestScenarios runs every check against an emulated Mac in a healthy and
// in broken states, including the emulator's faults, and asserts each
// check's verdict and what it tells the user.
func TestScenarios(t *testing.T) {
	healthy := func(m *fakeMac) {
		m.apply()
		m.installDaemon()
	}
	tests := []struct {
		name  string
		setup func(m *fakeMac)
		// want maps check IDs to their status; unlisted checks must be
		// OK or Info.
		want map[string]report.Status
		// says maps check IDs to text their message or fix must hold.
		says map[string][]string
		// failed and failedStrict are the exit verdicts.
		failed, failedStrict bool
	}{
		{
			name:  "healthy",
			setup: healthy,
			says: map[string][]string{
				"pf.status":        {"macake holds its own reference"},
				"pf.anchor":        {`anchor "com.apple/macake" has 6 rules on en0`},
				"pf.drift":         {"matches the policy files"},
				"net.reflectors":   {"2 reflectors answer", "192.0.2.1 12.3ms"},
				"net.counters":     {"en0's counters move"},
				"daemon.installed": {"/usr/local/bin/macake watch"},
				"daemon.running":   {"launchd runs org.macake.watch (pid 4242)"},
				"daemon.health":    {"macake watch (pid 4242, version v1.2.0, up 3h) answers; its last reconcile (drift, 12s ago): no changes"},
			},
		},
		{
			name: "fresh Mac, nothing applied, no daemon",
			want: map[string]report.Status{"daemon.bounds": report.Skipped, "pf.drift": report.Warning, "daemon.installed": report.Warning, "daemon.running": report.Skipped, "daemon.health": report.Skipped},
			says: map[string][]string{
				"pf.status": {"pf is disabled; macake enables it"},
				"pf.anchor": {"nothing installed"},
				// The fix names the directories this run checked (issue
				// 27, item 10).
				"pf.drift":         {"4 changes pending", "sudo macake --config-dir /", "/etc/links.d --state-dir /", "/state apply makes it match"},
				"daemon.installed": {"sudo macake --config-dir /", "/state install-daemon"},
			},
			failedStrict: true,
		},
		{
			name:  "hook line dropped by another tool",
			setup: func(m *fakeMac) { healthy(m); m.emu.DropHook() },
			want:  map[string]report.Status{"pf.hook": report.Problem},
			says: map[string][]string{
				"pf.hook": {`lacks dummynet-anchor "com.apple/*"`, "/etc/pf.conf", "\ndummynet-anchor \"com.apple/*\""},
			},
			failed: true, failedStrict: true,
		},
		{
			name:   "pf disabled by another tool",
			setup:  func(m *fakeMac) { healthy(m); m.emu.DisablePF() },
			want:   map[string]report.Status{"pf.status": report.Problem, "pf.drift": report.Warning},
			says:   map[string][]string{"pf.status": {"pf is disabled, so macake's rules are not in effect", "stale"}},
			failed: true, failedStrict: true,
		},
		{
			name:   "pipes flushed behind macake's back",
			setup:  func(m *fakeMac) { healthy(m); m.emu.FlushDummynet() },
			want:   map[string]report.Status{"pf.anchor": report.Problem, "pf.drift": report.Warning},
			says:   map[string][]string{"pf.anchor": {"pipe 48001 (upload on en0)", "drops the traffic"}},
			failed: true, failedStrict: true,
		},
		{
			name:         "anchor flushed behind macake's back",
			setup:        func(m *fakeMac) { healthy(m); m.emu.DeleteAnchor("com.apple/macake") },
			want:         map[string]report.Status{"pf.anchor": report.Warning, "pf.drift": report.Warning},
			says:         map[string][]string{"pf.anchor": {`pipe 48001 (link "wan"`, "has no rules"}},
			failedStrict: true,
		},
		{
			name: "another tool's pipes inside and outside macake's range",
			setup: func(m *fakeMac) {
				healthy(m)
				m.foreign("", "dnctl", "pipe", "48997", "config", "bw", "10Mbit/s", "delay", "100")
				m.foreign("", "dnctl", "pipe", "40269", "config", "bw", "1Mbit/s", "delay", "500")
			},
			want:         map[string]report.Status{"pf.foreign_pipes": report.Warning},
			says:         map[string][]string{"pf.foreign_pipes": {"1 pipe inside macake's range 48001-48998 is not macake's", "leaves it alone and skips its slot (a new link gets another; a link that has it stays unshaped until it is gone)", "1 pipe outside it (40269)", "pipe_range", "sudo dnctl pipe delete N"}},
			failedStrict: true,
		},
		{
			name: "another tool's pipe outside the range only",
			setup: func(m *fakeMac) {
				healthy(m)
				m.foreign("", "dnctl", "pipe", "40269", "config", "bw", "1Mbit/s")
			},
			says: map[string][]string{"pf.foreign_pipes": {"no other tool's pipe in macake's range", "(40269) belong to other tools and are never touched"}},
		},
		{
			name: "Network Link Conditioner on",
			setup: func(m *fakeMac) {
				healthy(m)
				m.foreign("", "dnctl", "pipe", "40269", "config", "bw", "1Mbit/s", "delay", "500")
				m.foreign("", "dnctl", "pipe", "40270", "config", "bw", "1Mbit/s", "delay", "500")
				m.foreign("no dummynet quick on lo0 all\ndummynet in quick inet all allow-opts pipe 40269\ndummynet out quick inet all allow-opts pipe 40270\n",
					"pfctl", "-a", "com.apple.nlc/base", "-f", "-")
			},
			want:         map[string]report.Status{"pf.nlc": report.Warning},
			says:         map[string][]string{"pf.nlc": {"on (3 dummynet rules, pipes 40269, 40270)", "turn it off"}},
			failedStrict: true,
		},
		{
			name: "a sibling anchor after macake's shapes the same interface",
			setup: func(m *fakeMac) {
				healthy(m)
				m.foreign("", "dnctl", "pipe", "40270", "config", "bw", "5Mbit/s")
				m.foreign("dummynet out on en0 all pipe 40270\n", "pfctl", "-a", "com.apple/srouter_throttle", "-f", "-")
			},
			want:         map[string]report.Status{"pf.foreign_anchors": report.Warning},
			says:         map[string][]string{"pf.foreign_anchors": {"com.apple/srouter_throttle: dummynet out on en0 all pipe 40270: evaluated after macake's rules"}},
			failedStrict: true,
		},
		{
			name: "a sibling anchor before macake's with a non-quick rule is harmless",
			setup: func(m *fakeMac) {
				healthy(m)
				m.foreign("", "dnctl", "pipe", "40270", "config", "bw", "5Mbit/s")
				m.foreign("dummynet out on en0 all pipe 40270\n", "pfctl", "-a", "com.apple/arena-latency", "-f", "-")
			},
			says: map[string][]string{"pf.foreign_anchors": {"do not overlap macake's"}},
		},
		{
			name: "a quick rule before macake's anchor",
			setup: func(m *fakeMac) {
				healthy(m)
				m.foreign("", "dnctl", "pipe", "40270", "config", "bw", "5Mbit/s")
				m.foreign("dummynet out quick on en0 all pipe 40270\n", "pfctl", "-a", "com.apple/arena-latency", "-f", "-")
			},
			want:         map[string]report.Status{"pf.foreign_anchors": report.Warning},
			says:         map[string][]string{"pf.foreign_anchors": {"never reaches macake's rules"}},
			failedStrict: true,
		},
		{
			name: "another tool's anchor in the main ruleset after the hook",
			setup: func(m *fakeMac) {
				healthy(m)
				m.foreign(strings.Replace(pfdntest.StockPFConf, `dummynet-anchor "com.apple/*"`+"\n", `dummynet-anchor "com.apple/*"`+"\n"+`dummynet-anchor "mop"`+"\n", 1), "pfctl", "-f", "-")
			},
			want:         map[string]report.Status{"pf.foreign_anchors": report.Warning},
			says:         map[string][]string{"pf.foreign_anchors": {`main ruleset: dummynet-anchor "mop" all`}},
			failedStrict: true,
		},
		{
			name:  "pfctl and dnctl missing",
			setup: func(m *fakeMac) { m.emu.SetToolsMissing(true) },
			want: map[string]report.Status{"daemon.bounds": report.Skipped,
				"pf.pfctl": report.Problem, "pf.dnctl": report.Problem,
				"pf.status": report.Skipped, "pf.hook": report.Skipped, "pf.anchor": report.Skipped, "pf.drift": report.Skipped,
				"pf.foreign_anchors": report.Skipped, "pf.foreign_pipes": report.Skipped, "pf.nlc": report.Skipped,
				"daemon.installed": report.Warning, "daemon.running": report.Skipped, "daemon.health": report.Skipped,
			},
			says:   map[string][]string{"pf.pfctl": {"/sbin/pfctl", "no such file or directory", "MACAKE_PFCTL overrides the path"}},
			failed: true, failedStrict: true,
		},
		{
			name: "not root",
			setup: func(m *fakeMac) {
				healthy(m)
				m.emu.SetPrivileged(false)
				m.euid = 501
			},
			want: map[string]report.Status{
				"pf.status": report.Warning, "pf.hook": report.Skipped, "pf.anchor": report.Skipped, "pf.drift": report.Skipped,
				"pf.foreign_anchors": report.Skipped, "pf.foreign_pipes": report.Skipped, "pf.nlc": report.Skipped,
			},
			says: map[string][]string{
				"pf.pfctl":  {"runs (reading the kernel's state needs root)"},
				"pf.status": {"run with sudo to check pf's status"},
			},
			failedStrict: true,
		},
		{
			name: "pfctl prints garbage",
			setup: func(m *fakeMac) {
				healthy(m)
				if err := m.emu.AddFault(pfdntest.Fault{Match: `^pfctl -a com.apple/macake -s dummynet$`, Kind: pfdntest.Garbage}); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]report.Status{
				"pf.status": report.Problem, "pf.hook": report.Skipped, "pf.anchor": report.Skipped, "pf.drift": report.Skipped,
				"pf.foreign_anchors": report.Skipped, "pf.foreign_pipes": report.Skipped, "pf.nlc": report.Skipped,
			},
			says:   map[string][]string{"pf.status": {"reading pf and dummynet failed"}},
			failed: true, failedStrict: true,
		},
		{
			name: "a broken policy file",
			setup: func(m *fakeMac) {
				healthy(m)
				m.writePolicy("lte", configtest.Policy{Interface: "en5", Download: "30mbps"}.TOML())
			},
			want:   map[string]report.Status{"config.policies": report.Problem, "pf.drift": report.Skipped},
			says:   map[string][]string{"config.policies": {"1 problem in 1 policy file; valid: wan", "lte.toml:4:", "macake validate --config-dir"}},
			failed: true, failedStrict: true,
		},
		{
			// The fix is the measurement, in this run's directories
			// (issue 27, items 4 and 10).
			name: "auto rates not measured yet",
			setup: func(m *fakeMac) {
				healthy(m)
				m.writePolicy("wan", "[match]\ninterface = \"en0\"\n[shaper]\ndownload = \"auto\"\nupload = \"auto\"\n")
			},
			want:         map[string]report.Status{"pf.drift": report.Warning},
			says:         map[string][]string{"pf.drift": {`shaper.download and shaper.upload are "auto"`, "/state measure --link wan, while on this network"}},
			failedStrict: true,
		},
		{
			name: "an invalid macake.toml",
			setup: func(m *fakeMac) {
				healthy(m)
				if err := os.WriteFile(filepath.Join(filepath.Dir(m.configDir), "macake.toml"), []byte("anchor = 7\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want:   map[string]report.Status{"config.settings": report.Problem, "pf.drift": report.Skipped},
			says:   map[string][]string{"config.settings": {"macake.toml: 1 problem"}},
			failed: true, failedStrict: true,
		},
		{
			name: "a policy file someone else can write",
			setup: func(m *fakeMac) {
				healthy(m)
				m.fs.owners = map[string]int{filepath.Join(m.configDir, "wan.toml"): 501}
			},
			want:   map[string]report.Status{"config.ownership": report.Problem},
			says:   map[string][]string{"config.ownership": {"wan.toml: owned by uid 501, not root", "sudo chown root"}},
			failed: true, failedStrict: true,
		},
		{
			name: "a corrupt state file",
			setup: func(m *fakeMac) {
				healthy(m)
				if err := os.WriteFile(state.Path(m.stateDir), []byte("{not json"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]report.Status{"config.state": report.Warning, "pf.status": report.Warning, "pf.drift": report.Warning},
			says: map[string][]string{
				"config.state": {"is corrupt", "pipe slots are rebuilt from the live rules"},
				"pf.status":    {"enabled by others only"},
				"pf.anchor":    {"the state file does not know the slot of pipes 48001, 48002"},
			},
			failedStrict: true,
		},
		{
			name: "one reflector silent",
			setup: func(m *fakeMac) {
				healthy(m)
				m.pinger.silent = map[netip.Addr]bool{netip.MustParseAddr("192.0.2.2"): true}
			},
			want:         map[string]report.Status{"net.reflectors": report.Warning},
			says:         map[string][]string{"net.reflectors": {"1 of 2 reflectors do not answer: 192.0.2.2"}},
			failedStrict: true,
		},
		{
			name: "no reflector answers",
			setup: func(m *fakeMac) {
				healthy(m)
				m.pinger.silent = map[netip.Addr]bool{netip.MustParseAddr("192.0.2.1"): true, netip.MustParseAddr("192.0.2.2"): true}
			},
			want:   map[string]report.Status{"net.reflectors": report.Problem},
			says:   map[string][]string{"net.reflectors": {"cannot measure latency"}},
			failed: true, failedStrict: true,
		},
		{
			name: "the pinger cannot open sockets as a user",
			setup: func(m *fakeMac) {
				healthy(m)
				m.euid = 501
				m.emu.SetPrivileged(false)
				m.pinger.err = errors.New("opening ICMP sockets: permission denied")
			},
			want: map[string]report.Status{
				"net.reflectors": report.Warning, "pf.status": report.Warning, "pf.hook": report.Skipped, "pf.anchor": report.Skipped, "pf.drift": report.Skipped,
				"pf.foreign_anchors": report.Skipped, "pf.foreign_pipes": report.Skipped, "pf.nlc": report.Skipped,
			},
			says:         map[string][]string{"net.reflectors": {"cannot probe the reflectors as this user", "run with sudo"}},
			failedStrict: true,
		},
		{
			name: "the pinger cannot open sockets as root",
			setup: func(m *fakeMac) {
				healthy(m)
				m.pinger.err = errors.New("opening ICMP sockets: operation not permitted")
			},
			want:   map[string]report.Status{"net.reflectors": report.Problem},
			says:   map[string][]string{"net.reflectors": {"cannot probe the reflectors"}},
			failed: true, failedStrict: true,
		},
		{
			name: "receive bytes stuck at zero",
			setup: func(m *fakeMac) {
				healthy(m)
				m.counters.readings = []ifstat.Counters{{RxPackets: 1000, TxBytes: 5000, TxPackets: 40, Index: 4}, {RxPackets: 1400, TxBytes: 9000, TxPackets: 80, Index: 4}}
			},
			want:   map[string]report.Status{"net.counters": report.Problem},
			says:   map[string][]string{"net.counters": {"receive bytes stuck at 0", `mode = "fixed"`}},
			failed: true, failedStrict: true,
		},
		{
			name: "LaunchDaemon plist edited",
			setup: func(m *fakeMac) {
				healthy(m)
				data, _ := m.mem.ReadFile(launchd.DaemonPlistPath)
				m.mem.AddFile(launchd.DaemonPlistPath, []byte(strings.Replace(string(data), "<integer>30</integer>", "<integer>5</integer>", 1)), 0o644, 0, 0)
			},
			want:         map[string]report.Status{"daemon.installed": report.Warning},
			says:         map[string][]string{"daemon.installed": {"differs from what this macake writes", "/state install-daemon rewrites it"}},
			failedStrict: true,
		},
		{
			name: "LaunchDaemon runs a binary that is gone",
			setup: func(m *fakeMac) {
				healthy(m)
				m.mem.Remove("/usr/local/bin/macake")
			},
			want:   map[string]report.Status{"daemon.installed": report.Problem},
			says:   map[string][]string{"daemon.installed": {"runs /usr/local/bin/macake, which is not an executable file"}},
			failed: true, failedStrict: true,
		},
		{
			name: "LaunchDaemon installed but not loaded",
			setup: func(m *fakeMac) {
				healthy(m)
				delete(m.launchctl.Loaded, "system/"+launchd.DaemonLabel)
				m.watch.state, m.watch.status = WatchState{}, nil
			},
			want:   map[string]report.Status{"daemon.bounds": report.Skipped, "daemon.running": report.Problem, "daemon.health": report.Skipped},
			says:   map[string][]string{"daemon.running": {"installed but not loaded", "launchctl bootstrap system"}},
			failed: true, failedStrict: true,
		},
		{
			name: "watch's last reconcile failed",
			setup: func(m *fakeMac) {
				healthy(m)
				m.watch.status.LastApply = &statusapi.Apply{At: harnessEpoch.Add(-4 * time.Minute), Trigger: "config", Result: "failed",
					Error: diag.Text("dnctl pipe 48002 config: exit 1: dnctl: setsockopt(IP_DUMMYNET_CONFIGURE): Invalid argument")}
			},
			want: map[string]report.Status{"daemon.health": report.Problem},
			says: map[string][]string{"daemon.health": {
				"its last reconcile (config, 4m ago) failed: dnctl pipe 48002 config", "/var/log/macake/watch.log and /var/log/macake/watch.stderr.log", "retries by itself",
			}},
			failed: true, failedStrict: true,
		},
		{
			name: "watch keeps a broken file's last good version",
			setup: func(m *fakeMac) {
				healthy(m)
				m.watch.status.ConfigErrors = []statusapi.ConfigError{{Diagnostic: diag.Diagnostic{File: "/etc/macake/links.d/wan.toml", Line: 3, Column: 12, Message: `shaper.download: rate "fast" needs a unit`, Link: "wan"}, Kept: "last_good"}}
				m.watch.status.Links[0].Error = diag.Text("download = \"auto\" needs a measurement: run macake measure")
			},
			want: map[string]report.Status{"daemon.health": report.Warning},
			says: map[string][]string{"daemon.health": {
				"1 policy file error in force", "1 problem keep shaping from being what the files say",
				`/etc/macake/links.d/wan.toml:3:12: shaper.download: rate "fast" needs a unit (its last good version stays in force)`,
				"link wan: download", "macake validate", "see macake status",
			}},
			failedStrict: true,
		},
		{
			name: "a link sits at its max",
			setup: func(m *fakeMac) {
				healthy(m)
				m.watch.status.Links[0].Advice = []statusapi.Advice{{Direction: "download", Bound: "max", Share: 0.62, LoadedSeconds: 2280, WindowSeconds: 3600,
					CurrentBits: 40_000_000, SuggestedBits: 56_000_000, File: "/etc/macake/links.d/wan.toml", Edit: `[autorate] download = { min = "10mbit", max = "56mbit" }`,
					Message: "download sat at max 62% of its loaded time in the last hour (38 min loaded): raise max from 40.0 Mbit/s to ~56.0 Mbit/s"}}
			},
			want: map[string]report.Status{"daemon.bounds": report.Info},
			says: map[string][]string{"daemon.bounds": {
				"1 bound to change: download sat at max 62%",
				`link wan: download sat at max 62% of its loaded time in the last hour (38 min loaded): raise max from 40.0 Mbit/s to ~56.0 Mbit/s; in /etc/macake/links.d/wan.toml set [autorate] download = { min = "10mbit", max = "56mbit" }`,
				"macake never changes them by itself",
			}},
		},
		{
			name: "watch holds the lock but does not answer",
			setup: func(m *fakeMac) {
				healthy(m)
				m.watch.status = nil
			},
			want: map[string]report.Status{"daemon.bounds": report.Skipped, "daemon.health": report.Problem},
			says: map[string][]string{
				"daemon.health":  {"macake watch (pid 4242) holds the state lock but does not answer on", "watch.sock", "launchctl kickstart -k system/org.macake.watch", "watch.stderr.log"},
				"daemon.running": {"launchd runs org.macake.watch (pid 4242)"},
			},
			failed: true, failedStrict: true,
		},
		{
			name: "watch answers only root",
			setup: func(m *fakeMac) {
				healthy(m)
				m.watch.askErr = fmt.Errorf("%w: readable by root and the admin group only; run with sudo", statusapi.ErrPermission)
			},
			want:         map[string]report.Status{"daemon.bounds": report.Skipped, "daemon.health": report.Warning},
			says:         map[string][]string{"daemon.health": {"this user may not ask macake watch", "run with sudo"}},
			failedStrict: true,
		},
		{
			name: "no policy matches this network",
			setup: func(m *fakeMac) {
				healthy(m)
				m.setFacts(`{"interfaces":[{"name":"en0","up":false},{"name":"en1","up":true,"gateway_ip":"10.0.0.1","default":true}]}`)
			},
			want: map[string]report.Status{"pf.drift": report.Warning},
			says: map[string][]string{
				"net.links":      {"default route via en1", "no policy matches this network"},
				"net.reflectors": {"no active autorate or balanced policy"},
			},
			failedStrict: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeMac(t, map[string]string{"wan": wanPolicy})
			if tt.setup != nil {
				tt.setup(m)
			}
			before := len(m.emu.MutatingCalls())
			rep := m.run()
			if n := len(m.emu.MutatingCalls()); n != before {
				t.Errorf("doctor changed pf/dummynet: %d mutating calls", n-before)
			}
			for _, r := range rep.Results {
				want, listed := tt.want[r.ID]
				switch {
				case listed && r.Status != want:
					t.Errorf("%s: %s, want %s: %s (fix: %s)", r.ID, r.Status, want, r.Message, r.Fix)
				case !listed && r.Status != report.OK && r.Status != report.Info:
					t.Errorf("%s: %s, want ok or info: %s (fix: %s)", r.ID, r.Status, r.Message, r.Fix)
				}
				if (r.Status == report.Warning || r.Status == report.Problem) && r.Fix == "" {
					t.Errorf("%s: a %s without a fix: %s", r.ID, r.Status, r.Message)
				}
			}
			for id, says := range tt.says {
				r := result(t, rep, id)
				text := r.Message + "\n" + r.Fix + "\n" + strings.Join(r.Details, "\n")
				for _, s := range says {
					if !strings.Contains(text, s) {
						t.Errorf("%s does not say %q:\n%s", id, s, text)
					}
				}
			}
			if got := rep.Failed(false); got != tt.failed {
				t.Errorf("Failed(strict=false) = %v, want %v; verdict %q", got, tt.failed, rep.Verdict())
			}
			if got := rep.Failed(true); got != tt.failedStrict {
				t.Errorf("Failed(strict=true) = %v, want %v; verdict %q", got, tt.failedStrict, rep.Verdict())
			}
		})
	}
}
