// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
)

// TestTeardownDeletesTheIFBsAsAGroup: down deletes macake's IFB devices
// in one `link del group` (the kernel waits one RCU grace period for them
// all, where 200 `link del` lines took 3.7 s), after checking that the
// group holds nothing of anyone else's; with a foreign device in it, or
// the group unreadable, it deletes them one by one as before.
func TestTeardownDeletesTheIFBsAsAGroup(t *testing.T) {
	for _, c := range []struct {
		name, group string
		grouped     bool
	}{
		{"empty group", "[]", true},
		{"iproute2 6.1's empty group", "[{},{},{}]", true},
		{"our own left in it", `[{"ifname":"ifb-macake3","group":"19787"}]`, true},
		{"a foreign device in it", `[{"ifname":"veth9","group":"19787"}]`, false},
		{"unreadable", "garbage", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := loadRecording(t, "htb-converged")
			r := rec.runner()
			r.okByDefault = true
			r.answers["ip -j link show group "+ifbGroup] = execrun.Result{Stdout: []byte(c.group)}
			if _, err := fakeBackend(r, rec.caps).Teardown(context.Background()); err != nil {
				t.Fatal(err)
			}
			var ipBatch string
			for _, call := range r.calls {
				if strings.Join(call.Argv, " ") == "ip -batch -" {
					ipBatch = call.Stdin
				}
			}
			if grouped := strings.HasSuffix(ipBatch, "link del group "+ifbGroup+"\n"); grouped != c.grouped {
				t.Errorf("group delete %v, want %v:\n%s", grouped, c.grouped, ipBatch)
			}
			if c.grouped && (strings.Contains(ipBatch, "link del dev") || !strings.Contains(ipBatch, "link set dev ifb-macake3 group "+ifbGroup)) {
				t.Errorf("the IFBs are not moved to the group and deleted with it:\n%s", ipBatch)
			}
			if !c.grouped && !strings.Contains(ipBatch, "link del dev ifb-macake3") {
				t.Errorf("the IFBs are not deleted one by one:\n%s", ipBatch)
			}
		})
	}
}
