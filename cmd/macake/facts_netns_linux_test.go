// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/plan"
)

// TestNetnsEveryCommandMatchesOnTheGatewayMAC: with real detection (no
// MACAKE_LINK_FACTS), a policy keyed on the gateway's MAC matches in
// links, status and apply alike, as it does in watch: they all read the
// network through sense/linkfacts. (apply and links once read only
// which interfaces were up, so such a policy matched in watch and nowhere
// else.)
func TestNetnsEveryCommandMatchesOnTheGatewayMAC(t *testing.T) {
	if netns.InChild() {
		t.Skip("parent half")
	}
	client, gw := netns.New(t, "gwm").Pair()
	client.Route("default", "via", netns.ServerIP4)
	mac := gw.HardwareAddr(netns.ServerDev).String()
	dir := t.TempDir()
	// apply plans against the pf/dummynet emulator (the child inherits
	// the environment).
	emu := pfdntest.BuildBinaries(t, t.TempDir())
	for _, kv := range emu.Env(filepath.Join(dir, "emulator.json")) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	links := filepath.Join(dir, "links.d")
	os.Mkdir(filepath.Join(dir, "state"), 0o755)
	configtest.Write(t, links, "home", configtest.Policy{Interface: netns.ClientDev, GatewayMAC: mac, Mode: "fixed", Download: "50mbit", Upload: "10mbit"}.TOML())
	configtest.Write(t, links, "hotel", configtest.Policy{Interface: netns.ClientDev, GatewayMAC: "02:00:00:00:00:99", Priority: 10, Mode: "fixed", Download: "5mbit", Upload: "1mbit"}.TOML())

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cli := func(args ...string) childResult {
		t.Helper()
		r := runCLIIn(t, ctx, client, append([]string{"--config-dir", links, "--state-dir", filepath.Join(dir, "state")}, args...)...)
		if r.Code != exitcode.OK {
			t.Fatalf("macake %s: exit %d\nstdout %s\nstderr %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
		return r
	}

	var lr desired.LinksReport
	if r := cli("links", "--json"); json.Unmarshal([]byte(r.Stdout), &lr) != nil {
		t.Fatalf("links --json: %s", r.Stdout)
	}
	if len(lr.Active) != 1 || lr.Active[0].Link != "home" || lr.FactsSource != "detected" {
		t.Errorf("links: active %+v from %q; want home, detected", lr.Active, lr.FactsSource)
	}
	var vc bool
	for _, i := range lr.Interfaces {
		if i.Name == netns.ClientDev {
			vc = i.GatewayIP == netns.ServerIP4 && i.GatewayMAC == mac && i.Default
		}
	}
	if !vc {
		t.Errorf("links does not show vc's gateway %s (%s): %+v", netns.ServerIP4, mac, lr.Interfaces)
	}
	if r := cli("links"); !strings.Contains(r.Stdout, "gateway "+netns.ServerIP4+" ("+mac+"), default route") {
		t.Errorf("links text lacks the gateway:\n%s", r.Stdout)
	}

	var st statusapi.Status
	if r := cli("status", "--json"); json.Unmarshal([]byte(r.Stdout), &st) != nil {
		t.Fatalf("status --json: %s", r.Stdout)
	}
	if len(st.Links) != 1 || st.Links[0].Name != "home" {
		t.Errorf("status: links %+v; want home", st.Links)
	}

	r := cli("apply", "--dry-run", "--json")
	var doc plan.JSONDocument
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
		t.Fatalf("apply --dry-run --json: %v\n%s", err, r.Stdout)
	}
	shaped := map[string]bool{}
	for _, ch := range doc.Changes {
		shaped[ch.Link] = true
	}
	if !shaped["home"] || shaped["hotel"] {
		t.Errorf("apply --dry-run plans for %v; want home only\n%s", shaped, r.Stdout)
	}
}
