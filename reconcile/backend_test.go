// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/pfdn/pfdntest"
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
		got, err := ChooseBackend(tc.goos, envOf(tc.env...))
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
	_, err := OpenBackend(BackendConfig{GOOS: "linux", Getenv: envOf()})
	if !Unavailable(err) || !strings.Contains(err.Error(), "tc) is not available yet") {
		t.Errorf("linux without the emulator: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "pfctl")
	_, err = OpenBackend(BackendConfig{GOOS: "darwin", Getenv: envOf("MACAKE_PFCTL", missing)})
	if !Unavailable(err) || !strings.Contains(err.Error(), missing+" does not exist") || !strings.Contains(err.Error(), "MACAKE_PFCTL") {
		t.Errorf("missing pfctl: %v", err)
	}
	_, err = OpenBackend(BackendConfig{GOOS: "darwin", Getenv: envOf("MACAKE_PFCTL", t.TempDir())})
	if !Unavailable(err) || !strings.Contains(err.Error(), "not an executable file") {
		t.Errorf("pfctl is a directory: %v", err)
	}
}

func TestOpenBackendUsesSettings(t *testing.T) {
	b, err := OpenBackend(BackendConfig{
		GOOS: "darwin", Getenv: envOf(), Runner: pfdntest.New(),
		Settings: config.Daemon{Anchor: "com.apple/shaper", PipeRange: config.PipeRange{First: 51001, Last: 51010}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "pf" || b.MaxSlots != 5 || b.Scope != `pf anchor "com.apple/shaper", dummynet pipes 51001-51010` {
		t.Errorf("opened %q, %d slots, scope %q", b.Name, b.MaxSlots, b.Scope)
	}
}
