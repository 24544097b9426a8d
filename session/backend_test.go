// SPDX-License-Identifier: Apache-2.0

package session_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/backend/tc/tctest"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/session"
	"github.com/macake/macake/shape"
)

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestChooseBackend(t *testing.T) {
	for _, tc := range []struct {
		goos string
		env  []string
		want string
		bad  string
	}{
		{goos: "darwin", want: "pf"},
		{goos: "linux", want: "tc"},
		{goos: "linux", env: []string{"MACAKE_PFCTL", "/tmp/pfctl"}, want: "pf"},
		{goos: "linux", env: []string{"MACAKE_DNCTL", "/tmp/dnctl"}, want: "pf"},
		{goos: "darwin", env: []string{"MACAKE_BACKEND", "tc"}, want: "tc"},
		{goos: "linux", env: []string{"MACAKE_BACKEND", "pf"}, want: "pf"},
		{goos: "linux", env: []string{"MACAKE_BACKEND", "nft"}, bad: "unknown backend"},
		{goos: "windows", bad: "not on windows"},
	} {
		got, err := backend.Choose(tc.goos, envOf(tc.env...))
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%s %v: err %v, want %q", tc.goos, tc.env, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %v: %q, %v; want %q", tc.goos, tc.env, got, err, tc.want)
		}
	}
}

func TestOpenBackendUnavailable(t *testing.T) {
	noTC := filepath.Join(t.TempDir(), "tc")
	_, err := backend.Open(backend.Config{GOOS: "linux", Getenv: envOf("MACAKE_TC", noTC)})
	if !backend.Unavailable(err) || !strings.Contains(err.Error(), noTC+" does not exist") || !strings.Contains(err.Error(), "apt-get install iproute2") || !strings.Contains(err.Error(), "MACAKE_TC") {
		t.Errorf("linux without tc: %v", err)
	}
	self, _ := os.Executable() // an executable file that stands in for tc
	_, err = backend.Open(backend.Config{GOOS: "linux", Getenv: envOf("MACAKE_TC", self, "MACAKE_IP", "no-such-ip-tool")})
	if !backend.Unavailable(err) || !strings.Contains(err.Error(), "no-such-ip-tool is not in /usr/sbin") || !strings.Contains(err.Error(), "MACAKE_IP") {
		t.Errorf("linux without ip: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "pfctl")
	_, err = backend.Open(backend.Config{GOOS: "darwin", Getenv: envOf("MACAKE_PFCTL", missing)})
	if !backend.Unavailable(err) || !strings.Contains(err.Error(), missing+" does not exist") || !strings.Contains(err.Error(), "MACAKE_PFCTL") {
		t.Errorf("missing pfctl: %v", err)
	}
	_, err = backend.Open(backend.Config{GOOS: "darwin", Getenv: envOf("MACAKE_PFCTL", t.TempDir())})
	if !backend.Unavailable(err) || !strings.Contains(err.Error(), "not an executable file") {
		t.Errorf("pfctl is a directory: %v", err)
	}
}

func TestOpenBackendUsesSettings(t *testing.T) {
	b, err := backend.Open(backend.Config{
		GOOS: "darwin", Getenv: envOf(), Runner: pfdntest.New(),
		Settings: session.BackendSettings(settings.Daemon{Anchor: "com.apple/shaper", PipeRange: settings.PipeRange{First: 51001, Last: 51010}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if i := b.Info(); i.Name != "pf" || i.MaxSlots != 5 || i.Scope != `pf anchor "com.apple/shaper", dummynet pipes 51001-51010` {
		t.Errorf("opened %q, %d slots, scope %q", i.Name, i.MaxSlots, i.Scope)
	}
}

// recorded is the recording at path (tctest.ReadRecorded).
func recorded(t *testing.T, path string) tctest.Recorded {
	t.Helper()
	r, err := tctest.ReadRecorded(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOpenBackendTC(t *testing.T) {
	run := recorded(t, "../backend/tc/testdata/diff/htb-converged/live.txtar")
	b, err := backend.Open(backend.Config{GOOS: "linux", Getenv: envOf(), Runner: run})
	if err != nil {
		t.Fatal(err)
	}
	i := b.Info()
	if i.Name != "tc" || !i.KernelOverhead || i.MaxSlots != tc.MaxSlot+1 || i.System != "tc" {
		t.Errorf("opened %q, kernel overhead %v, %d slots, system %q", i.Name, i.KernelOverhead, i.MaxSlots, i.System)
	}
	if !strings.Contains(i.Scope, "4d4b:") || !strings.Contains(i.Scope, "ifb-macake*") {
		t.Errorf("scope %q must name the root handle and the IFB names", i.Scope)
	}
	// The recorded system has wan0 redirected to ifb-macake3 and lan0 to
	// ifb-macake4: a lost state file gives the links those slots again.
	use, err := b.(backend.SlotReader).LiveSlots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"wan0": 3, "lan0": 4}; !maps.Equal(use.Interfaces, want) {
		t.Errorf("live slots %v, want %v", use.Interfaces, want)
	}
	// Status reads the shapers: wan0's upload, and each IFB's download
	// attributed to the interface redirected to it (lan0's root is
	// foreign, so it has no upload shaper). The recorded iproute2 prints
	// htb rates as text, to whole kbit/s.
	sr := b.(backend.ShaperReader)
	shapers, err := sr.LiveShapers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.LiveShaper{
		{Name: "qdisc 4d4b: on ifb-macake3", Interface: "wan0", Direction: "download", RateBits: 30123000, QueueBytes: 131072},
		{Name: "qdisc 4d4b: on ifb-macake4", Interface: "lan0", Direction: "download", RateBits: 8000000, QueueBytes: 30000},
		{Name: "qdisc 4d4b: on wan0", Interface: "wan0", Direction: "upload", RateBits: 20000000, QueueBytes: 65536},
	}
	if !reflect.DeepEqual(shapers, want) {
		t.Errorf("live shapers\n%+v\nwant\n%+v", shapers, want)
	}
	if got := sr.ShaperName(shape.Link{Interface: "wan0", Slot: 3}, shape.Download); got != "qdisc 4d4b: on ifb-macake3" {
		t.Errorf("download shaper name %q", got)
	}
	if got := sr.ShaperName(shape.Link{Interface: "wan0", Slot: 3}, shape.Upload); got != "qdisc 4d4b: on wan0" {
		t.Errorf("upload shaper name %q", got)
	}
}

func TestTCToolsFromEnv(t *testing.T) {
	got := tc.ToolsFromEnv(envOf("MACAKE_TC", "/opt/iproute2/tc", "MACAKE_UNSHARE", "/opt/unshare"))
	if got.TC != "/opt/iproute2/tc" || got.Unshare != "/opt/unshare" || got.IP == "" || got.Netns != "" {
		t.Errorf("tools %+v", got)
	}
}

// TestLoadOptionsAreTheBackends: what validate checks for a target is
// what that target's backend reports.
func TestLoadOptionsAreTheBackends(t *testing.T) {
	if o := session.LoadOptions(config.TargetLinux, true); o.Limits != tc.Limits || o.Target != config.TargetLinux || !o.SkipOwnershipCheck {
		t.Errorf("LoadOptions(linux) = %+v", o)
	}
	if o := session.LoadOptions(config.TargetDarwin, false); o.Limits != pfdn.Limits || o.Target != config.TargetDarwin || o.SkipOwnershipCheck {
		t.Errorf("LoadOptions(darwin) = %+v", o)
	}
}
