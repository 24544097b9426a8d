// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"strings"

	"github.com/macake/macake/config"
)

// AutoratePolicy is the policy `macake watch` runs with on a trace, under
// law (config.LawMacake or config.LawUpstream): it starts at 90 % of the
// trace's mean and may range from 5 Mbit/s (2 up) to 20 % above the
// trace's peak, probing reflectors (the six of Reflectors, as ICMP, in
// most tests; entries as the policy file writes them, so "tcp:R:443" or
// "auto:R:443" too) at the default 20 Hz; every other key is its law's
// default (docs/CONFIG.md). The simulated twin runs the same text.
func AutoratePolicy(tr Trace, law config.ControlLaw, reflectors []string) string {
	return fmt.Sprintf(`description = "e2e: autorate"
[match]
interface = %q
[shaper]
mode = "autorate"
download = "%dkbit"
upload = "%dkbit"
queue = "auto"
[autorate]
controller = %q
download = { min = "%dkbit", max = "%dkbit" }
upload = { min = "%dkbit", max = "%dkbit" }
reflectors = [%s]
`, ClientDev, tr.Mean(true)*9/10000, tr.Mean(false)*9/10000, law,
		min(5000, tr.Mean(true)*9/10000), tr.Max(true)*12/10000, min(2000, tr.Mean(false)*9/10000), tr.Max(false)*12/10000, quoted(reflectors))
}

// FixedPolicy shapes at rate with a queue of 10 ms at that rate (the
// calibration setup of reference/benchmark.md §6.4(e)).
func FixedPolicy(down, up int64) string {
	return fmt.Sprintf(`description = "e2e: fixed shaper"
[match]
interface = %q
[shaper]
mode = "fixed"
download = "%dkbit"
upload = "%dkbit"
queue = "%dB"
[autorate]
reflectors = [%s]
`, ClientDev, down/1000, up/1000, max(down/800, 6056), quoted(Reflectors))
}

func quoted(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
