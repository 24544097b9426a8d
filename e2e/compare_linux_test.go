// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/measure"
)

// TestBenchCompareOnThisKernel runs `macake bench --compare` for real: a
// 20/5 Mbit/s ISP with a second of buffer, macake's speed-test server
// beyond it, and a fixed policy at 85 % with a 10 ms queue on the client.
// Without a watch, bench takes the shaping down, applies it and takes it
// down again (it was not applied before, so it stays down); the unshaped
// runs must grade badly and the shaped one well, on CUBIC flows.
func TestBenchCompareOnThisKernel(t *testing.T) {
	tr := Trace{Name: "constant", Length: time.Minute, Steps: []Step{{0, 20e6, 5e6}}}
	tb := NewTestbed(t, "cmp", tr)
	ln, err := tb.Server.Listen(netns.CubicListenConfig(), "tcp4", serverAddr+":8080")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: speedtest.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	m := NewMacake(t, macake(t), tb.Client, ClientDev, ispLAN)
	m.SetPolicy(t, "cmp", FixedPolicy(17_000_000, 4_250_000))
	// Three runs of 1 s idle and three 4 s loads each, with apply and down
	// between: about a minute, more on a busy machine.
	r, err := m.Run(context.Background(), 4*time.Minute, "bench", "--compare", "--server", fmt.Sprintf("http://%s:8080", serverAddr),
		"--idle", "1s", "--duration", "4s", "--settle", "0s", "--json")
	if err != nil || r.Code != 0 {
		t.Fatalf("macake bench --compare: %v\n%s", err, r)
	}
	var rep measure.CompareReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("bench --compare --json: %v\n%s", err, r)
	}
	if len(rep.Runs) != 3 || rep.Runs[0].Shaped || !rep.Runs[1].Shaped || rep.Runs[2].Shaped {
		t.Fatalf("runs: %+v", rep.Runs)
	}
	for _, run := range rep.Runs {
		g := run.Report.Grades
		t.Logf("%s: download %.1f Mbit/s, upload %.1f Mbit/s, grades %s/%s/%s overall %s, RPM %v (%s), confidence %s %q", run.Name,
			float64(run.Report.Download.BitsPerSecond)/1e6, float64(run.Report.Upload.BitsPerSecond)/1e6,
			g.Download.Grade, g.Upload.Grade, g.Both.Grade, g.Overall, deref(g.Both.RPM), g.Both.Responsiveness, g.Confidence, g.Notes)
	}
	if !strings.Contains("DF", string(rep.Before)) || !strings.Contains("A+AB", string(rep.After)) {
		t.Errorf("grade %s unshaped, %s shaped: the shaper should turn a second of bloat into at most B", rep.Before, rep.After)
	}
	if !strings.Contains(r.Stderr, "macake down and apply take the shaping off and put it on") {
		t.Errorf("bench did not say how it switches:\n%s", r.Stderr)
	}
	// It was not applied before the compare, so it is not after.
	if out := tb.Client.TC("qdisc", "show", "dev", ClientDev); strings.Contains(out, "4d4b:") {
		t.Errorf("bench --compare left the shaping in place:\n%s", out)
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}
