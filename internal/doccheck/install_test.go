// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallOnlyCopies: the docs' `sudo make install` builds nothing. It
// used to build again, as root: where sudo resets PATH it failed with
// "go: not found", and where it worked it left a root-owned bin/. Run
// with a PATH without Go, install copies what `make build man
// completions` made, and without them it says what to run first (issue
// 27, item 7).
func TestInstallOnlyCopies(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("skipping: make is not installed")
	}
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "Makefile"), b, 0o644)
	run := func() (string, error) {
		cmd := exec.Command(mk, "install", "DESTDIR="+filepath.Join(dir, "dest"), "PREFIX=/usr/local")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + filepath.Dir(mk) + ":/usr/bin:/bin", "HOME=" + dir}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	if err == nil || !strings.Contains(out, "bin/macake is missing: run 'make build man completions' first, as yourself") || strings.Contains(out, "go build") {
		t.Errorf("install without the built files: %v\n%s", err, out)
	}
	for _, f := range []string{"bin/macake", "bin/man/macake.1", "bin/completions/macake.bash", "bin/completions/_macake", "bin/completions/macake.fish"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644)
	}
	if out, err := run(); err != nil || strings.Contains(out, "go build") {
		t.Fatalf("install: %v\n%s", err, out)
	}
	for _, f := range []string{"bin/macake", "share/man/man1/macake.1", "share/bash-completion/completions/macake", "share/zsh/site-functions/_macake", "share/fish/vendor_completions.d/macake.fish"} {
		if _, err := os.Stat(filepath.Join(dir, "dest/usr/local", f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
}
