// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/service/systemd"
)

// TestNetnsSystemdUnitCapabilitiesSuffice: the watch unit keeps only
// systemd.WatchCapabilities (CapabilityBoundingSet=) and sets
// NoNewPrivileges=; root with exactly those shapes a real interface with
// tc, converges and removes it all again. Without CAP_NET_ADMIN the same
// apply fails, so the restriction is real. (The rest of the sandbox needs
// systemd as PID 1, which the test machine lacks.)
func TestNetnsSystemdUnitCapabilitiesSuffice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	lab := netns.New(t, "cap")
	lab.Require("setpriv", "util-linux")
	lab.Require("tc", "iproute2")
	host, _ := lab.Pair()

	dir := t.TempDir()
	macake := buildMacake(t, dir)
	links := filepath.Join(dir, "links.d")
	configtest.Write(t, links, "lab", configtest.Policy{Interface: netns.ClientDev, Mode: "fixed", Download: "50mbit", Upload: "10mbit"}.TOML())
	// systemd creates the unit's StateDirectory= before it starts it;
	// macake creates only its default one itself.
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o711); err != nil {
		t.Fatal(err)
	}
	facts := filepath.Join(dir, "facts.json")
	os.WriteFile(facts, []byte(`{"interfaces":[{"name":"`+netns.ClientDev+`","up":true}]}`), 0o644)
	env := []string{"MACAKE_BACKEND=tc", linkfacts.EnvFile + "=" + facts, "NO_COLOR=1"}

	var keep []string
	for _, c := range systemd.WatchCapabilities {
		keep = append(keep, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	// As systemd starts the unit: root, the bounding set cut to the unit's,
	// nothing inheritable, no new privileges.
	run := func(caps string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		argv := append([]string{"setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all" + caps, "--",
			macake, "--config-dir", links, "--state-dir", filepath.Join(dir, "state")}, args...)
		return host.ExecContext(ctx, env, argv...)
	}
	unitCaps := "," + strings.Join(keep, ",")

	if out, err := run(",+net_raw", "apply"); err == nil {
		t.Fatalf("apply without CAP_NET_ADMIN succeeded; the bounding set is not applied:\n%s", out)
	} else {
		t.Logf("without CAP_NET_ADMIN: %v\n%s", err, out)
	}
	if out, err := run(unitCaps, "apply"); err != nil {
		t.Fatalf("apply with the unit's capabilities %v: %v\n%s", systemd.WatchCapabilities, err, out)
	}
	if q := host.TC("qdisc", "show", "dev", netns.ClientDev); !strings.Contains(q, "4d4b:") {
		t.Fatalf("%s is not shaped after apply:\n%s", netns.ClientDev, q)
	}
	if out, err := run(unitCaps, "apply"); err != nil || !strings.HasPrefix(out, "No changes.") {
		t.Fatalf("second apply: %v\n%s", err, out)
	}
	if out, err := run(unitCaps, "down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if q := host.TC("qdisc", "show", "dev", netns.ClientDev); strings.Contains(q, "4d4b:") {
		t.Fatalf("%s is still shaped after down:\n%s", netns.ClientDev, q)
	}
}
