// SPDX-License-Identifier: Apache-2.0

package realmac

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
)

var (
	buildOnce  sync.Once
	binPath    string
	macakePath string
	buildErr   error
)

// binDir is a directory for this test binary's builds, removed by
// TestMain.
func binDir(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() { binPath, buildErr = os.MkdirTemp("", "macake-realmac-") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

var macakeOnce sync.Once

// macakeBinary builds macake once per test binary.
func macakeBinary(t *testing.T) string {
	t.Helper()
	dir := binDir(t)
	macakeOnce.Do(func() {
		out := filepath.Join(dir, "macake")
		// go test puts the go tool's directory first on PATH.
		cmd := execrun.Command{Argv: []string{"go", "build", "-o", out, "github.com/macake/macake/cmd/macake"}}
		res, err := execrun.Exec{Timeout: 5 * time.Minute, Env: []string{"CGO_ENABLED=0"}}.Run(context.Background(), cmd)
		if _, err = execrun.Check(cmd, res, err); err == nil {
			macakePath = out
		}
	})
	if macakePath == "" {
		t.Fatal("building macake failed")
	}
	return macakePath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(binPath)
	}
	os.Exit(code)
}
