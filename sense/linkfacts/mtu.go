// SPDX-License-Identifier: Apache-2.0

package linkfacts

import "net"

// MTUs returns the MTU of each named interface that exists here (what
// desired.Inputs.MTU wants); interfaces it cannot find are left out.
func MTUs(names []string) map[string]int {
	mtus := map[string]int{}
	for _, n := range names {
		if ifi, err := net.InterfaceByName(n); err == nil && ifi.MTU > 0 {
			mtus[n] = ifi.MTU
		}
	}
	return mtus
}
