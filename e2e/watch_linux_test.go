// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
)

// eventually polls cond every 100 ms until it holds or within passes,
// failing the test with what.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWatchRepairsTheKernel runs macake watch on the tc backend with a
// short drift interval and breaks what it built, the way other tools and
// a flaky kernel do: a rate changed by hand, the IFB deleted, tc failing
// for a while, the interface renamed and back. Each time the kernel must
// come back to the policy without anyone running apply.
func TestWatchRepairsTheKernel(t *testing.T) {
	cli, m := faultLab(t)
	ctx := context.Background()
	m.SetPolicy(t, "wan", fixedWAN)
	failFlag := filepath.Join(t.TempDir(), "fail")
	fakeTC := refusingTC(t, `(^| )class (replace|change) dev wan0( |$)`, `[ -e '`+failFlag+`' ] && echo x >> '`+failFlag+`'`)
	m.Env = append(m.Env, "MACAKE_TC="+fakeTC)
	tcShow := func(args ...string) string {
		out, _ := cli.ExecContext(ctx, nil, append([]string{"tc"}, args...)...)
		return out
	}
	uploadRate := func() string { return tcShow("-d", "class", "show", "dev", ClientDev) }
	// Ready also checks that the overhead is counted once: the policy's
	// rate unchanged, and the overhead on the class.
	w := &WatchShaper{M: m, Args: []string{"--drift-interval", "1s"}, Ready: func(context.Context) bool {
		return strings.Contains(uploadRate(), "rate 8Mbit overhead 18") && strings.Contains(uploadRate(), "mpu 64") &&
			strings.Contains(tcShow("class", "show", "dev", tc.IFBName(0)), "rate 40Mbit")
	}}
	w.StartFor(t)

	cli.Exec("tc", "class", "change", "dev", ClientDev, "parent", "4d4b:", "classid", "4d4b:1", "htb", "rate", "1mbit", "ceil", "1mbit")
	eventually(t, 15*time.Second, "the upload rate changed by hand was not repaired", func() bool {
		return strings.Contains(uploadRate(), "rate 8Mbit")
	})

	cli.Exec("ip", "link", "del", "dev", tc.IFBName(0))
	eventually(t, 15*time.Second, "the deleted IFB was not recreated with its shaper", func() bool {
		return strings.Contains(tcShow("class", "show", "dev", tc.IFBName(0)), "rate 40Mbit") &&
			strings.Contains(tcShow("filter", "show", "dev", ClientDev, "ingress"), tc.IFBName(0))
	})

	// tc refuses the upload class for a while: watch keeps trying on its
	// drift ticks and converges once tc works again.
	os.WriteFile(failFlag, nil, 0o644)
	cli.Exec("tc", "qdisc", "del", "dev", ClientDev, "root")
	eventually(t, 15*time.Second, "watch never retried the failing tc", func() bool {
		b, _ := os.ReadFile(failFlag)
		return strings.Count(string(b), "x") >= 2
	})
	os.Remove(failFlag)
	eventually(t, 15*time.Second, "watch did not converge after tc recovered", func() bool {
		return strings.Contains(uploadRate(), "rate 8Mbit") &&
			strings.Contains(tcShow("filter", "show", "dev", ClientDev, "parent", "4d4b:"), "pref 19785")
	})

	// Someone replaces macake's root qdisc: it was macake's, so the drift
	// tick restores it, with its probe exemptions.
	cli.Exec("tc", "qdisc", "replace", "dev", ClientDev, "root", "handle", "1:", "pfifo", "limit", "100")
	eventually(t, 15*time.Second, "the root qdisc someone put in place of macake's was not replaced back", func() bool {
		q := tcShow("qdisc", "show", "dev", ClientDev)
		return !strings.Contains(q, "pfifo 1:") && strings.Contains(uploadRate(), "rate 8Mbit") &&
			strings.Contains(tcShow("filter", "show", "dev", ClientDev, "parent", "4d4b:"), "pref 19785")
	})

	// The interface is renamed: what macake built there goes; with its
	// name back, the link is shaped again.
	cli.Exec("ip", "link", "set", "dev", ClientDev, "down")
	cli.Exec("ip", "link", "set", "dev", ClientDev, "name", "wan1")
	eventually(t, 15*time.Second, "macake's objects stayed on the renamed interface", func() bool {
		return !strings.Contains(tcShow("qdisc", "show", "dev", "wan1"), "4d4b:")
	})
	cli.Exec("ip", "link", "set", "dev", "wan1", "name", ClientDev)
	cli.Exec("ip", "link", "set", "dev", ClientDev, "up")
	eventually(t, 15*time.Second, "the interface was not shaped again once its name was back", func() bool {
		return strings.Contains(uploadRate(), "rate 8Mbit")
	})

	if _, err := w.Stop(ctx); err != nil {
		t.Fatalf("%v\nwatch output:\n%s", err, w.Output())
	}
	if q := tcShow("qdisc", "show", "dev", ClientDev); strings.Contains(q, "4d4b:") {
		t.Errorf("down after watch left macake's root:\n%s", q)
	}
	out := w.Output()
	mustContain(t, "the watch log", out.Stdout+out.Stderr, "drift repaired", "root qdisc on wan0 replaced by someone else (pfifo 1:)")
}

// TestWatchRepairsAClassDeletedUnderLoad: under load the controller
// changes rates over netlink several times a second; someone deletes the
// upload class (and with it its queue) under the running daemon. The next
// rate change fails, its error is logged once with the kernel's cause, and
// the repair pass that failure sets off (well before the 30 s drift check)
// puts the class back, with its queue, before the controller goes on.
func TestWatchRepairsAClassDeletedUnderLoad(t *testing.T) {
	tr := Trace{Name: "constant", Steps: []Step{{Download: 50_000_000, Upload: 10_000_000}}, Length: time.Hour}
	tb := NewTestbed(t, "mkdc", tr)
	tb.Client.DisableOffloads(ClientDev)
	m := NewMacake(t, macake(t), tb.Client, ClientDev, ispLAN)
	m.SetPolicy(t, "dc", AutoratePolicy(tr, config.LawMacake, Reflectors))
	w := newWatchShaper(m, tb)
	ctx := context.Background()
	load := startUnderLoad(ctx, t, w, tb)
	defer load.Stop()
	time.Sleep(3 * time.Second)
	tb.Client.Exec("tc", "class", "del", "dev", ClientDev, "classid", "4d4b:1")
	eventually(t, 20*time.Second, "the deleted class was not put back before the drift check", func() bool {
		classes, _ := tb.Client.ExecContext(ctx, nil, "tc", "class", "show", "dev", ClientDev)
		qdiscs, _ := tb.Client.ExecContext(ctx, nil, "tc", "qdisc", "show", "dev", ClientDev)
		return strings.Contains(classes, "class htb 4d4b:1 ") && strings.Contains(qdiscs, "qdisc bfifo 4d4c:")
	})
	time.Sleep(2 * time.Second) // the controller goes on changing rates
	load.Stop()
	if _, err := w.Stop(ctx); err != nil {
		t.Fatalf("%v\nwatch output:\n%s", err, w.Output())
	}
	out := w.Output().Stdout + w.Output().Stderr
	var failed []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "setting a rate failed") && !strings.Contains(line, "level=DEBUG") {
			failed = append(failed, line)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "netlink") {
		t.Errorf("the failed change is logged %d times, want once with its cause:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	// The repair is the pass the failure set off, not the drift check.
	mustContain(t, "the watch log", out, "trigger=retry result=applied")
	t.Logf("%s", strings.Join(failed, "\n"))
}
