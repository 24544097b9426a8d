// SPDX-License-Identifier: Apache-2.0

package archtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// unlinked are packages (a trailing / for a whole tree) that must not be
// linked into macake, with the reason. Every linked package is
// initialised, and its code paged in, in every run of the one binary,
// `macake watch` included, used or not (docs/MEASUREMENTS.md, "Memory").
var unlinked = map[string]string{
	"github.com/prometheus/":      "the metrics are written in the text format by package metrics: the client library and protobuf cost the daemon 2.7 MiB resident",
	"google.golang.org/protobuf/": "linked only through the Prometheus client",
	"testing":                     "test helpers the binary links (pfdntest) take an interface instead",
}

// TestTheBinaryLinksNoHeavyPackage: macake, for Linux and for macOS,
// links none of the packages above.
func TestTheBinaryLinksNoHeavyPackage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipping: no go tool on PATH")
	}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-deps", "github.com/macake/macake/cmd/macake")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=arm64", "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (%s): %v", goos, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 100 {
			t.Fatalf("go list (%s) listed %d packages: the check sees nothing", goos, len(deps))
		}
		for _, dep := range deps {
			for bad, why := range unlinked {
				if dep == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad)) {
					t.Errorf("macake for %s links %s: %s", goos, dep, why)
				}
			}
		}
	}
}
