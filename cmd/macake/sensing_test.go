// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/desired"
)

func TestSensingCommandsRejectBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"measure", "--duration", "1s"},
		{"measure", "--streams", "0"},
		{"measure", "--reflector", "one.one.one.one"},
		{"measure", "extra"},
		{"bench", "--idle", "10ms"},
		{"bench", "--reflector", "224.0.0.1"},
		{"monitor", "--every", "1ms"},
		{"monitor", "--interval", "1ms"},
		{"monitor", "--reflector", "0.0.0.0"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != exitUsage || stderr == "" {
			t.Errorf("macake %v: exit %d, stderr %q; want 64 and a message", args, code, stderr)
		}
	}
}

func TestMeasureSaysWhenTheFactsFileIsBroken(t *testing.T) {
	e := testEnv(t, map[string]string{"MACAKE_LINK_FACTS": "/nonexistent/facts.json"})
	if code := runMeasure(e, []string{"--server", "http://127.0.0.1:1"}); code != exitFailure {
		t.Errorf("exit %d", code)
	}
	if s := e.stderr.(*strings.Builder).String(); !strings.Contains(s, "MACAKE_LINK_FACTS=/nonexistent/facts.json") {
		t.Errorf("stderr %q", s)
	}
}

// testEnv is an env whose environment variables come from vars, with
// strings.Builder outputs.
func testEnv(t *testing.T, vars map[string]string) *env {
	return &env{ctx: t.Context(), stdin: strings.NewReader(""), stdout: &strings.Builder{}, stderr: &strings.Builder{},
		getenv: func(k string) string { return vars[k] }, euid: func() int { return 1000 },
		configDir: t.TempDir(), stateDir: t.TempDir()}
}

func TestResolveTargetUsesThePolicyOrTheDefaultRoute(t *testing.T) {
	dir := t.TempDir()
	facts := filepath.Join(dir, "facts.json")
	os.WriteFile(facts, []byte(`{"interfaces":[
		{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","default":true},
		{"name":"en5","up":true,"gateway_ip":"10.0.0.1"},
		{"name":"en6","up":true},
		{"name":"en8","up":false,"gateway_ip":"10.8.0.1"}]}`), 0o644)
	links := filepath.Join(dir, "links.d")
	os.Mkdir(links, 0o755)
	os.WriteFile(filepath.Join(links, "home.toml"), []byte(starlinkShaping+`[autorate]
reflectors        = ["192.0.2.1", "192.0.2.2", "192.0.2.3"]
active_reflectors = 2
probe_interval    = "100ms"
`), 0o644)
	policy := func(name, iface, mac string) {
		configtest.Write(t, links, name, configtest.Policy{Interface: iface, GatewayMAC: mac, Download: "900mbit", Upload: "40mbit"}.TOML())
	}
	policy("dock", "en5", "")
	policy("starlink", "en7", "")
	policy("bridge", "en6", "")
	policy("spare", "en8", "")
	policy("office", "en0", "00:11:22:33:44:55")
	policy("anyen0", "en0", "")

	e := testEnv(t, map[string]string{"MACAKE_LINK_FACTS": facts})
	e.configDir = links
	// No --link: the policy matching the default route's network.
	got, err := resolveTarget(e, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "home" || got.Interface != "en0" || got.ProbeInterval != 100*time.Millisecond || len(got.Reflectors) != 2 || got.ProfileKey() != "home@74:24:9f:00:00:01" {
		t.Errorf("matched target %+v (key %s)", got, got.ProfileKey())
	}
	// --link names the active policy: the same target, with the given
	// reflectors.
	got, err = resolveTarget(e, "home", config.ICMPReflectors([]netip.Addr{netip.MustParseAddr("198.51.100.1")}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "home" || got.Interface != "en0" || len(got.Reflectors) != 1 || got.ProfileKey() != "home@74:24:9f:00:00:01" || got.Note != "" {
		t.Errorf("--link home: %+v", got)
	}
	// A policy that matches but is outranked is measured, with a note,
	// under the key watch would use for it.
	got, err = resolveTarget(e, "anyen0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "anyen0" || got.Interface != "en0" || got.ProfileKey() != "anyen0@74:24:9f:00:00:01" || !strings.Contains(got.Note, "outranked by home") {
		t.Errorf("--link anyen0: %+v", got)
	}
	// A link beside the default route's is measured through itself: the
	// probes and the load are bound to its interface.
	got, err = resolveTarget(e, "dock", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "dock" || got.BoundInterface() != "en5" || got.ProfileKey() != "dock" || !strings.Contains(got.Note, "bound to en5") {
		t.Errorf("--link dock: %+v (key %s), want it bound to en5", got, got.ProfileKey())
	}
	if got, _ := resolveTarget(e, "home", nil); got.BoundInterface() != "" {
		t.Errorf("--link home is bound to %s; the default route's link follows the routing table", got.BoundInterface())
	}
	// --link of a policy whose interface no measurement can cross is
	// refused rather than measured under the wrong name.
	for _, tc := range []struct{ link, want string }{
		{"bridge", "its interface en6 has no gateway (no route leaves through it; en0 carries the default route)"},
		{"spare", "its interface en8 is down"},
		{"starlink", "its interface en7 does not exist on this machine now (interfaces: en0, en5, en6, en8)"},
		{"office", "the policy does not match the current network: gateway_mac is 74:24:9f:00:00:01, not 00:11:22:33:44:55"},
	} {
		if got, err := resolveTarget(e, tc.link, nil); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--link "+tc.link+": ") {
			t.Errorf("--link %s: %+v, %v; want the error %q", tc.link, got, err, tc.want)
		}
	}
	if _, err := resolveTarget(e, "nope", nil); err == nil || !strings.Contains(err.Error(), "no such policy") {
		t.Errorf("unknown link: %v", err)
	}
	// No matching policy: the default route's interface and the default
	// reflectors, with a note.
	e.configDir = filepath.Join(dir, "empty")
	got, err = resolveTarget(e, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Link != "" || got.Interface != "en0" || len(got.Reflectors) != 6 || got.Note == "" || got.ProfileKey() != "en0@74:24:9f:00:00:01" {
		t.Errorf("fallback %+v", got)
	}
	// No default route: an error the commands recognise, with the
	// reflectors still resolved (monitor probes them anyway).
	os.WriteFile(facts, []byte(`{"interfaces":[{"name":"en0","up":true}]}`), 0o644)
	given := config.ICMPReflectors([]netip.Addr{netip.MustParseAddr("127.0.0.1")})
	got, err = resolveTarget(e, "", given)
	if !errors.Is(err, desired.ErrNoDefaultRoute) || len(got.Reflectors) != 1 || got.Reflectors[0] != given[0] || got.ProbeInterval <= 0 || got.Interface != "" {
		t.Errorf("no default route: %+v, %v", got, err)
	}
	e.configDir = links
	if _, err := resolveTarget(e, "home", nil); !errors.Is(err, desired.ErrNoDefaultRoute) {
		t.Errorf("--link without a default route: %v", err)
	}
}

// TestNoDefaultRouteHintFitsTheCommand: each command's hint names only
// flags it has.
func TestNoDefaultRouteHintFitsTheCommand(t *testing.T) {
	facts := filepath.Join(t.TempDir(), "facts.json")
	os.WriteFile(facts, []byte(`{"interfaces":[{"name":"en0","up":true}]}`), 0o644)
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"monitor", "--duration", "1s"}, "pass --reflector ADDR", "--link"},
		{[]string{"measure", "--no-save"}, "no default route", "--reflector"},
	} {
		e := testEnv(t, map[string]string{"MACAKE_LINK_FACTS": facts})
		code := lookup(tc.args[0]).run(e, tc.args[1:])
		stderr := e.stderr.(*strings.Builder).String()
		if code != exitFailure || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, tc.not) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1, %q and no %q", tc.args, code, stderr, tc.want, tc.not)
		}
	}
}

func TestNotSavedHintsSudoOnlyOnPermissionErrors(t *testing.T) {
	denied := &os.PathError{Op: "open", Path: "/var/db/macake/state.json", Err: os.ErrPermission}
	if m := notSavedMessage(fmt.Errorf("writing state: %w", denied)); !strings.Contains(m, "sudo") {
		t.Errorf("permission denied: %q, want the sudo hint", m)
	}
	if m := notSavedMessage(errors.New("a direction measured no throughput")); strings.Contains(m, "sudo") {
		t.Errorf("not a permission problem: %q, want no sudo hint", m)
	}
}
