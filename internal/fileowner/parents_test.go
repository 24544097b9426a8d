// SPDX-License-Identifier: Apache-2.0

package fileowner

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUnsafeAncestor: a directory above the path that others may write
// (or that another user owns) is found, through symbolic links and for a
// path that does not exist yet; /tmp's sticky bit makes it safe.
func TestUnsafeAncestor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the check wants root-owned directories")
	}
	base := t.TempDir() // under /tmp: 1777, sticky
	safe := filepath.Join(base, "etc", "macake", "links.d")
	open := filepath.Join(base, "open")
	if err := os.MkdirAll(safe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(open, "macake"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	owned := filepath.Join(base, "owned")
	if err := os.MkdirAll(filepath.Join(owned, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(owned, 501, 20); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(open, "macake"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, dir, problem string }{
		{safe, "", ""},
		{filepath.Join(safe, "not-yet", "deeper"), "", ""},
		{filepath.Join(open, "macake", "links.d"), open, "writable by group or others (mode 0777)"},
		{filepath.Join(open, "new"), open, "writable by group or others (mode 0777)"},
		{filepath.Join(owned, "state"), owned, "owned by uid 501, not root"},
		{filepath.Join(base, "link", "links.d"), open, "writable by group or others (mode 0777)"},
	} {
		dir, problem := UnsafeAncestor(tc.path)
		if dir != tc.dir || problem != tc.problem {
			t.Errorf("UnsafeAncestor(%s) = %q, %q; want %q, %q", tc.path, dir, problem, tc.dir, tc.problem)
		}
	}
}
