// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/macake/macake/backend"
)

// EnableIntent is what macake records, durably, just before it runs
// `pfctl -E` (backend.EnableIntent, kept by the backend.Store).
type EnableIntent = backend.EnableIntent

// enableProcess is the process name pf records for a `pfctl -E`.
const enableProcess = "pfctl"

// ageSlack absorbs the difference between pf's clock and the wall clock
// the intent was stamped with; pf prints ages in whole seconds, rounded
// down, so the token's age is never more than the intent's.
const ageSlack = time.Second

// recoverIntent resolves an intent left by an interrupted run against the
// live references: the one token pfctl took after in.At that was not held
// before is macake's. It returns that token ("" when pfctl -E never ran,
// or pf dropped the reference since: nothing to recover) and, when several
// tokens fit, a warning naming them, since macake cannot tell which is its
// own and must not release another tool's.
func recoverIntent(in EnableIntent, live Live, now time.Time) (token, warning string) {
	window := now.Sub(in.At) + ageSlack
	var fits []string
	for _, r := range live.References {
		if r.Process == enableProcess && r.Age <= window && !slices.Contains(in.Before, r.Token) {
			fits = append(fits, r.Token)
		}
	}
	switch len(fits) {
	case 0:
		return "", ""
	case 1:
		return fits[0], ""
	}
	return "", fmt.Sprintf("an interrupted macake run took a pf reference at %s, but %d references (%s) were taken by pfctl since then and macake cannot tell which one is its own; "+
		"release it with `sudo pfctl -X TOKEN` once you know which (`sudo pfctl -s References`), or leave it: a pf reference only keeps pf enabled",
		in.At.UTC().Format(time.RFC3339), len(fits), strings.Join(fits, ", "))
}
