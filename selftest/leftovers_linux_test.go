// SPDX-License-Identifier: Apache-2.0

package selftest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/selftest/scratch"
	"github.com/macake/macake/selftest/tccheck"
)

// scratchNetns lists which of ns and its peer exist.
func scratchNetns(t *testing.T, ip, ns string) []string {
	t.Helper()
	out, err := exec.Command(ip, "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	var found []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == ns || f[0] == tccheck.Peer(ns)) {
			found = append(found, f[0])
		}
	}
	return found
}

// TestKilledTCSelftestIsCleanedUp: what a SIGKILLed tc selftest leaves
// (its recorded namespace, which stands for its peer too) is named by a
// dry run, deleted by the next RemoveLeftovers (`macake down`, or the
// next selftest), and then there is nothing left to say.
func TestKilledTCSelftestIsCleanedUp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: creates a network namespace, which needs root (CI runs as root)")
	}
	tools := tc.DefaultTools()
	if !strings.HasPrefix(tools.IP, "/") {
		t.Skip("skipping: ip (iproute2) is not installed")
	}
	// A name of this test's own, as the tccheck tests use.
	ns := fmt.Sprintf("%s-t%d", tccheck.ScratchNetns, os.Getpid())
	dir := t.TempDir()
	// As the killed selftest did: the record first, then the namespace.
	led, err := scratch.Open(dir, "tc", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := led.SetNetns(ns); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{ns, tccheck.Peer(ns)} {
		if out, err := exec.Command(tools.IP, "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
		}
		t.Cleanup(func() { exec.Command(tools.IP, "netns", "del", ns).Run() })
	}

	o := Options{StateDir: dir, Getenv: func(string) string { return "" }}
	if line, err := DescribeLeftovers(o); err != nil || !strings.Contains(line, "would be removed: network namespaces "+ns+" and "+tccheck.Peer(ns)) {
		t.Fatalf("dry run: %q, %v", line, err)
	}
	if ns := scratchNetns(t, tools.IP, ns); len(ns) != 2 {
		t.Fatalf("a dry run must not delete the namespaces; left %q", ns)
	}
	line, err := RemoveLeftovers(context.Background(), o)
	if err != nil || !strings.Contains(line, "removed what an earlier selftest (pid") ||
		!strings.Contains(line, "deleted network namespace "+ns+", deleted network namespace "+tccheck.Peer(ns)) {
		t.Fatalf("RemoveLeftovers: %q, %v", line, err)
	}
	if ns := scratchNetns(t, tools.IP, ns); len(ns) > 0 {
		t.Errorf("namespaces still there: %q", ns)
	}
	if _, ok, err := scratch.Load(dir); ok || err != nil {
		t.Errorf("the scratch record must be gone (%v, %v)", ok, err)
	}
	if line, err := RemoveLeftovers(context.Background(), o); line != "" || err != nil {
		t.Errorf("a second run found %q, %v", line, err)
	}
}
