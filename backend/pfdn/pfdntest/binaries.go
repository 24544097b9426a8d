// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"context"
	"path/filepath"
	"time"

	"github.com/macake/macake/execrun"
)

// Binaries are the paths of the built emulator programs.
type Binaries struct {
	Pfctl, Dnctl string
}

// Env returns the environment that points macake at the binaries and the
// binaries at stateFile: MACAKE_PFCTL, MACAKE_DNCTL and PFDN_EMU_STATE.
func (b Binaries) Env(stateFile string) []string {
	return []string{"MACAKE_PFCTL=" + b.Pfctl, "MACAKE_DNCTL=" + b.Dnctl, EnvState + "=" + stateFile}
}

// TB is the part of testing.TB that BuildBinaries uses. The emulator is
// linked into macake itself (selftest compares a Mac with it), and naming
// testing.TB here would link package testing into every macake binary.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// BuildBinaries builds the emulated pfctl and dnctl into dir with the go
// tool, for end-to-end tests that run real processes.
func BuildBinaries(tb TB, dir string) Binaries {
	tb.Helper()
	// go test puts the go tool's directory first on PATH.
	cmd := execrun.Command{Argv: []string{"go", "build", "-o", dir,
		"github.com/macake/macake/backend/pfdn/pfdntest/cmd/pfctl",
		"github.com/macake/macake/backend/pfdn/pfdntest/cmd/dnctl"}}
	res, err := execrun.Exec{Timeout: 5 * time.Minute, Env: []string{"CGO_ENABLED=0"}}.Run(context.Background(), cmd)
	if _, err = execrun.Check(cmd, res, err); err != nil {
		tb.Fatalf("building the emulator binaries: %v\n%s", err, res.Stderr)
	}
	return Binaries{Pfctl: filepath.Join(dir, "pfctl"), Dnctl: filepath.Join(dir, "dnctl")}
}
