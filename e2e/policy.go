// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
)

// AutoratePolicy is the policy `macake watch` runs with on a trace, under
// law (config.LawMacake or config.LawUpstream): it starts at 90 % of the
// trace's mean and may range from 5 Mbit/s (2 up) to 20 % above the
// trace's peak, probing reflectors (the six of Reflectors, as ICMP, in
// most tests; entries as the policy file writes them, so "tcp:R:443" or
// "auto:R:443" too) at the default 20 Hz; every other key is its law's
// default (docs/CONFIG.md). The simulated twin runs the same text.
func AutoratePolicy(tr Trace, law config.ControlLaw, reflectors []string) string {
	down, up := tr.Mean(true)*9/10, tr.Mean(false)*9/10
	return configtest.Policy{
		Interface: ClientDev, Mode: "autorate", Download: kbit(down), Upload: kbit(up),
		More: fmt.Sprintf(`queue = "auto"
[autorate]
controller = %q
download = { min = %q, max = %q }
upload = { min = %q, max = %q }
reflectors = [%s]
`, law, kbit(min(5_000_000, down)), kbit(tr.Max(true)*12/10), kbit(min(2_000_000, up)), kbit(tr.Max(false)*12/10), quoted(reflectors)),
	}.TOML()
}

// FixedPolicy shapes at rate with a queue of 10 ms at that rate (the
// calibration setup of reference/benchmark.md §6.4(e)).
func FixedPolicy(down, up int64) string {
	return configtest.Policy{
		Interface: ClientDev, Mode: "fixed", Download: kbit(down), Upload: kbit(up),
		More: fmt.Sprintf("queue = \"%dB\"\n[autorate]\nreflectors = [%s]\n", max(down/800, 6056), quoted(Reflectors)),
	}.TOML()
}

// kbit writes a rate in bits per second as a policy's whole kbit/s.
func kbit(bitsPerSecond int64) string { return fmt.Sprintf("%dkbit", bitsPerSecond/1000) }

func quoted(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
