// SPDX-License-Identifier: Apache-2.0

//go:build !realmac

package realmac

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/macake/macake/backend/pfdn/pfdntest"
)

var (
	emuOnce sync.Once
	emuBins pfdntest.Binaries
)

// tools runs the suite against the emulator's binaries, each test on a
// freshly booted emulated Mac of its own.
func tools(t *testing.T) toolset {
	t.Helper()
	if testing.Short() {
		t.Skip("builds binaries; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("the emulated pfctl and dnctl refuse a user as a Mac's do; run the tests as root, as CI does (on a Mac: sudo go test -tags realmac ./e2e/realmac)")
	}
	emuOnce.Do(func() { emuBins = pfdntest.BuildBinaries(t, binDir(t)) })
	state := filepath.Join(t.TempDir(), "emulator.json")
	return toolset{pfctl: emuBins.Pfctl, dnctl: emuBins.Dnctl, env: []string{pfdntest.EnvState + "=" + state},
		packets: "the pfdntest emulator has no packet path; run the suite on a Mac with -tags realmac"}
}
