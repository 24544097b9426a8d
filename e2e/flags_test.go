// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/macake/macake/score"
)

var (
	phaseLength = flag.Duration("e2e.phase", 15*time.Second, "loaded length of each phase (the trace is cut or squeezed to it)")
	traceNames  = flag.String("e2e.traces", "steps", "comma-separated scenarios (testdata/traces names, lte, or a path under the shared traces); NAME:upN adds N upload flows to that run")
	idleLength  = flag.Duration("e2e.idle", 3*time.Second, "idle window of each phase (the controller's warm-up)")
	upFlows     = flag.Int("e2e.up", 0, "upload flows besides the 4 download flows (every run without :upN)")
	lostDelay   = flag.Duration("e2e.lost-delay", score.DefaultLostDelay, "the delay a lost ping or call packet counts as in the percentiles and the score, on the kernel and in the twin")
)

// afterTests run once every test is done.
var afterTests []func()

func TestMain(m *testing.M) {
	flag.Parse()
	LostDelay = *lostDelay
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}
