// SPDX-License-Identifier: Apache-2.0

package service

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOSFiles checks the real file system side in a temporary directory:
// atomic write with the exact mode despite the umask, directory mode, and
// chown when running as root.
func TestOSFiles(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	var f OSFiles
	logDir := filepath.Join(dir, "log", "macake")
	if err := f.MkdirAll(logDir, 0o755, CurrentUser); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(logDir); err != nil || !fi.IsDir || fi.Mode.Perm() != 0o755 || fi.UID != os.Getuid() {
		t.Errorf("MkdirAll: %+v, %v; want a 0755 directory owned by uid %d", fi, err, os.Getuid())
	}
	path := filepath.Join(dir, "job.plist")
	owner := CurrentUser
	if os.Geteuid() == 0 {
		owner = Owner{UID: 1, GID: 1, Name: "daemon:daemon"}
	}
	for _, content := range []string{"one", "two"} {
		if err := f.WriteFile(path, []byte(content), 0o644, owner); err != nil {
			t.Fatal(err)
		}
		if got, err := f.ReadFile(path); err != nil || string(got) != content {
			t.Fatalf("ReadFile = %q, %v", got, err)
		}
	}
	fi, _ := f.Stat(path)
	if fi.Mode.Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode)
	}
	if owner.UID > 0 && (fi.UID != 1 || fi.GID != 1) {
		t.Errorf("owner %d:%d, want 1:1", fi.UID, fi.GID)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := f.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second Remove = %v, want ErrNotExist", err)
	}
	if _, err := f.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat after Remove = %v", err)
	}
}
