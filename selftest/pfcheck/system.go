// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"fmt"
	"runtime"

	"github.com/macake/macake/selftest/check"
)

// The system checks read what macOS's kernel reports about the network
// (the routing socket, the interface counters) and compare macake's
// portable parsers with golang.org/x/net/route on the same bytes. There
// is no emulator of them: elsewhere the parsers are tested on recorded
// bytes.
// sensingRef labels the checks of the sensors' readings, which are no
// fact of pf or dummynet: the section of docs/ARCHITECTURE.md on where
// each input comes from.
const sensingRef = "ARCHITECTURE.md: Sensing"

func systemChecks() []check.Check {
	skip := func() string {
		if runtime.GOOS != "darwin" {
			return fmt.Sprintf("needs macOS's routing socket and sysctls (this is %s; sense/linkfacts and sense/ifstat test the parsers on recorded bytes)", runtime.GOOS)
		}
		return ""
	}
	return []check.Check{
		{
			ID: "route.dump", Ref: sensingRef, Skip: skip, Probe: probeRoutes,
			Fact: "macake's routing-dump parser reads every route and neighbour message as x/net/route does",
		},
		{
			ID: "ifstat.counters", Ref: sensingRef, Skip: skip, Probe: probeCounters,
			Fact: "lo0's exact ifdata counters and the rounded NET_RT_IFLIST2 dump agree; x/net/route names its interfaces alike",
		},
	}
}
