// SPDX-License-Identifier: Apache-2.0

package selftest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/selftest/scratch"
	"github.com/macake/macake/selftest/tccheck"
)

func netnsExists(t *testing.T, ip string) bool {
	t.Helper()
	out, err := exec.Command(ip, "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == tccheck.ScratchNetns {
			return true
		}
	}
	return false
}

// TestKilledTCSelftestIsCleanedUp: what a SIGKILLed tc selftest leaves
// (its recorded namespace) is named by a dry run, deleted by the next
// RemoveLeftovers (`macake down`, or the next selftest), and then there
// is nothing left to say.
func TestKilledTCSelftestIsCleanedUp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: creates a network namespace, which needs root (CI runs as root)")
	}
	tools := tc.DefaultTools()
	if !strings.HasPrefix(tools.IP, "/") {
		t.Skip("skipping: ip (iproute2) is not installed")
	}
	if netnsExists(t, tools.IP) {
		t.Skipf("skipping: network namespace %s exists: a selftest is running on this machine", tccheck.ScratchNetns)
	}
	dir := t.TempDir()
	// As the killed selftest did: the record first, then the namespace.
	led, err := scratch.Open(dir, "tc", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := led.SetNetns(tccheck.ScratchNetns); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tools.IP, "netns", "add", tccheck.ScratchNetns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(tools.IP, "netns", "del", tccheck.ScratchNetns).Run() })

	o := Options{StateDir: dir, Getenv: func(string) string { return "" }}
	if line, err := DescribeLeftovers(o); err != nil || !strings.Contains(line, "would be removed: network namespace "+tccheck.ScratchNetns) {
		t.Fatalf("dry run: %q, %v", line, err)
	}
	if !netnsExists(t, tools.IP) {
		t.Fatal("a dry run must not delete the namespace")
	}
	line, err := RemoveLeftovers(context.Background(), o)
	if err != nil || !strings.Contains(line, "removed what an earlier selftest (pid") || !strings.Contains(line, "deleted network namespace "+tccheck.ScratchNetns) {
		t.Fatalf("RemoveLeftovers: %q, %v", line, err)
	}
	if netnsExists(t, tools.IP) {
		t.Error("the namespace is still there")
	}
	if _, ok, err := scratch.Load(dir); ok || err != nil {
		t.Errorf("the scratch record must be gone (%v, %v)", ok, err)
	}
	if line, err := RemoveLeftovers(context.Background(), o); line != "" || err != nil {
		t.Errorf("a second run found %q, %v", line, err)
	}
}
