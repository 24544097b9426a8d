// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/internal/netns"
)

// TestNetnsInitMeasureDetectsAndFillsTheRates: on a real kernel (the
// client namespace behind a gateway, a 20/8 Mbit/s bottleneck beyond it),
// init finds the default route's interface, the gateway's IP and MAC, and
// with --measure writes 95 % of the measured capacity; validate accepts
// the file.
func TestNetnsInitMeasureDetectsAndFillsTheRates(t *testing.T) {
	if netns.InChild() {
		t.Skip("parent half")
	}
	l := newSensingLab(t)
	dir := filepath.Join(t.TempDir(), "links.d")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	r := runCLIIn(t, ctx, l.client, "--config-dir", dir, "--state-dir", t.TempDir(),
		"init", "isp", "--measure", "--server", l.url, "--reflector", labServer, "--idle", "1s", "--duration", "4s")
	if r.Code != exitcode.OK {
		t.Fatalf("init --measure: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("stdout:\n%s", r.Stdout)
	path := filepath.Join(dir, "isp.toml")
	text, _ := os.ReadFile(path)
	t.Logf("%s", text)
	link, _, err := config.LoadFile(path, config.LoadOptions{SkipOwnershipCheck: true})
	if err != nil {
		t.Fatalf("the written policy does not load: %v", err)
	}
	if m := link.Match; m.Interface != "vc" || m.GatewayMAC.String() != l.gwMAC.String() {
		t.Errorf("match %+v; want interface vc and the gateway's MAC %s", m, l.gwMAC)
	}
	if !strings.Contains(string(text), `# gateway_ip = "`+labGateway+`"`) {
		t.Errorf("the gateway's IP %s is not noted:\n%s", labGateway, text)
	}
	// 95 % of the bottleneck, less what TCP and framing take: 20 Mbit/s
	// down gives about 17-19 Mbit/s, 8 Mbit/s up about 7.
	down, up := link.Shaper.Download.Rate, link.Shaper.Upload.Rate
	if down < 15*units.Mbit || down > 19*units.Mbit || up < 6*units.Mbit || up > 8*units.Mbit {
		t.Errorf("rates %s down, %s up; want 95 %% of about 20 and 8 Mbit/s", down, up)
	}
	mustContain(t, "the policy", string(text), "# Measured on ")
	if code, out, errs := runCLI(t, "--config-dir", dir, "validate"); code != exitcode.OK {
		t.Errorf("validate: exit %d\n%s%s", code, out, errs)
	}
}
