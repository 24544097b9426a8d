// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/desired"
)

func TestLinksExplainsEveryPolicy(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "cable": cablePolicy, "travel": travelPolicy, "lte": ltePolicy},
		`{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","ssid":"STARLINK","default":true},{"name":"en5","up":false}]}`)
	code, stdout, stderr := r.runAs(501, "links")
	if code != exitcode.OK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	mustContain(t, "links output", stdout,
		`  en0  up    gateway 192.168.1.1 (74:24:9f:00:00:01), SSID "STARLINK", default route`,
		"  en5  down",
		"    cable     en0  fixed     gateway_mac=a4:91:b1:00:00:02\n      gateway_mac is 74:24:9f:00:00:01, not a4:91:b1:00:00:02\n",
		"    lte       en5  autorate  (any network on the interface)\n      interface en5 is down\n",
		"  * starlink  en0  autorate  gateway_mac=74:24:9f:00:00:01\n      active: interface en0 is up and gateway_mac match\n",
		"    travel    en0  off       priority=-10\n      matches, but outranked by starlink (priority 0 > -10)\n",
		"Active: starlink on en0 (mode autorate).\n",
		"No policy matches on en5: it is not shaped.\n",
	)
	if len(r.emu.Calls()) != 0 {
		t.Errorf("links ran pfctl/dnctl")
	}

	code, stdout, _ = r.runAs(501, "links", "--json")
	var rep desired.LinksReport
	if code != exitcode.OK || json.Unmarshal([]byte(stdout), &rep) != nil {
		t.Fatalf("--json: exit %d, %s", code, stdout)
	}
	if len(rep.Policies) != 4 || len(rep.Active) != 1 || rep.Active[0].Link != "starlink" || rep.Active[0].Interface != "en0" ||
		rep.Policies[0].Name != "cable" || rep.Policies[0].Match.GatewayMAC != "a4:91:b1:00:00:02" || rep.Policies[0].Active {
		t.Errorf("--json: %+v", rep)
	}
}

func TestLinksWithABrokenFile(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy, "bad": "[match]\ninterface = 3\n"}, starlinkFacts)
	code, stdout, stderr := r.runAs(501, "links")
	if code != exitcode.Config || !strings.Contains(stderr, "bad.toml:2:") || !strings.Contains(stdout, "* starlink") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	r.setFacts(`{"interfaces":[{"name":"en0","up":true,"bogus":1}]}`)
	if code, _, stderr := r.runAs(501, "links"); code != exitcode.Failure || !strings.Contains(stderr, "unknown field") {
		t.Errorf("bad facts: exit %d, %s", code, stderr)
	}
}
