// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/daemon/boundsadvice"
	"github.com/macake/macake/daemon/statusapi"
)

// TestAdviceOnACapacityAboveMax runs macake watch on the real kernel
// behind a 40 Mbit/s ISP with a policy whose download max is 10 Mbit/s,
// under four CUBIC downloads: the controller climbs to its max and stays
// there, and once the download has been loaded for boundsadvice.MinLoaded
// `macake status --json` advises raising max, with the line to put in the
// policy file, and `macake status` prints it; the policy file is not
// touched.
func TestAdviceOnACapacityAboveMax(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a loaded link for over a minute; skipped with -short")
	}
	trace := Trace{Name: "constant-40-10", Steps: []Step{{Download: 40_000_000, Upload: 10_000_000}}}
	tb := NewTestbed(t, "e2ea", trace)
	m := NewMacake(t, macake(t), tb.Client, ClientDev, ispLAN)
	policy := configtest.Policy{Interface: ClientDev, Download: "8mbit", Upload: "8mbit", More: `[autorate]
download = { min = "2mbit", max = "10mbit" }
upload = { min = "2mbit", max = "12mbit" }
reflectors = [` + quoted(Reflectors) + "]\n"}.TOML()
	m.SetPolicy(t, "wan", policy)
	ctx := context.Background()
	w := newWatchShaper(m, tb)
	w.StartFor(t)
	load, err := tb.StartLoad(ctx, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer load.Stop()

	status := func() statusapi.Status {
		r := m.MustRun(t, 0, "status", "--json")
		var st statusapi.Status
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, r.Stdout)
		}
		return st
	}
	start := time.Now()
	var advice []statusapi.Advice
	for len(advice) == 0 {
		if time.Since(start) > boundsadvice.MinLoaded+90*time.Second {
			st := status()
			t.Fatalf("no advice after %v of load; the link: %+v\nwatch:\n%s", time.Since(start).Round(time.Second), st.Links, w.Output())
		}
		time.Sleep(2 * time.Second)
		if st := status(); len(st.Links) == 1 {
			advice = st.Links[0].Advice
		}
	}
	t.Logf("advice after %v of load: %s", time.Since(start).Round(time.Second), advice[0].Message)
	a := advice[0]
	if a.Direction != "download" || a.Bound != "max" || a.CurrentBits != 10_000_000 || a.SuggestedBits != 14_000_000 || a.Share <= 0.5 ||
		a.Edit != `[autorate] download = { min = "2mbit", max = "14mbit" }` || !strings.HasSuffix(a.File, "wan.toml") {
		t.Errorf("advice: %+v", a)
	}
	text := m.MustRun(t, 0, "status").Stdout
	mustContain(t, "macake status", text, "advice: download sat at max", `set [autorate] download = { min = "2mbit", max = "14mbit" }`)
	doctor, _ := m.Run(ctx, time.Minute, "doctor")
	mustContain(t, "macake doctor", doctor.Stdout, "bounds: 1 bound to change: download sat at max")
	if got := readPolicy(t, m, "wan"); got != policy {
		t.Errorf("the policy file changed:\n%s", got)
	}
}

// readPolicy reads links.d/NAME.toml back.
func readPolicy(t *testing.T, m *Macake, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.ConfigDir, name+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
