// SPDX-License-Identifier: Apache-2.0

//go:build realmac

package realmac

import (
	"os"
	"runtime"
	"testing"

	"github.com/macake/macake/backend/pfdn"
)

// tools runs the suite against this Mac's own pfctl and dnctl.
func tools(t *testing.T) toolset {
	t.Helper()
	if runtime.GOOS != "darwin" {
		t.Skip("skipping: -tags realmac runs the suite against macOS's pfctl and dnctl; this is " + runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping: pfctl and dnctl need root: sudo go test -tags realmac ./e2e/realmac")
	}
	return toolset{pfctl: pfdn.DefaultPfctl, dnctl: pfdn.DefaultDnctl}
}
