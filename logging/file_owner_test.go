// SPDX-License-Identifier: Apache-2.0

//go:build unix

package logging_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/logging"
)

// TestLogFileIsOpenedLikeTheStateDirectory: the daemon's log file is not
// opened through a symbolic link (a user's link in a shared directory had
// root append its log to a root-only file), and with CheckOwnership (a
// daemon run as root) not in a directory others may write, sticky or not,
// nor when the file is not root's (issue 27).
func TestLogFileIsOpenedLikeTheStateDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the checks want root's directories and files")
	}
	base := t.TempDir()
	os.Chmod(base, 0o755)
	dir := func(name string, mode os.FileMode) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, mode)
		return d
	}
	private, shared, sticky := dir("private", 0o755), dir("shared", 0o777), dir("sticky", 0o1777)
	target := filepath.Join(private, "root-only")
	os.WriteFile(target, []byte("secret\n"), 0o600)
	link := filepath.Join(private, "link.log")
	os.Symlink(target, link)
	linkShared := filepath.Join(sticky, "macake.log")
	os.Symlink(target, linkShared)
	users := filepath.Join(private, "users.log")
	os.WriteFile(users, nil, 0o644)
	os.Chown(users, 65534, 65534)

	for _, c := range []struct {
		path, want string
		check      bool
	}{
		{filepath.Join(private, "watch.log"), "", true},
		{filepath.Join(private, "new", "watch.log"), "", true},
		{link, "symbolic link", false},
		{link, "symbolic link", true},
		{linkShared, "symbolic link", false},
		{filepath.Join(shared, "watch.log"), "writable by group or others", true},
		{filepath.Join(sticky, "watch.log"), "writable by group or others", true},
		{users, "owned by uid 65534", true},
	} {
		f, err := logging.OpenFile(c.path, logging.FileOptions{CheckOwnership: c.check})
		if err == nil {
			f.Close()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (checks %v): %v", c.path, c.check, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s (checks %v): %v, want a refusal saying %q", c.path, c.check, err, c.want)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "secret\n" {
		t.Errorf("the file a link pointed at was written: %q", b)
	}
}
