// SPDX-License-Identifier: Apache-2.0

package fileowner

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// UnsafeAncestor checks the directories that lead to path, as ssh checks
// those above a key: after resolving symbolic links, every directory from
// path's parent up to the root must be owned by root and writable by
// nobody else, or else whoever can write one of them can put their own
// file or directory in path's place. A directory writable by all with the
// sticky bit set (/tmp) passes: nobody else can rename or remove what root
// keeps in it. It returns the first directory that fails and what is wrong
// with it, or "" and "".
func UnsafeAncestor(path string) (dir, problem string) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path, err.Error()
	}
	// The first directory to check: the real parent of path, or, for a
	// path that does not exist yet, the real form of its deepest
	// existing ancestor.
	first := ""
	for at := abs; first == ""; at = filepath.Dir(at) {
		if r, err := filepath.EvalSymlinks(at); err == nil {
			first = r
			if at == abs {
				first = filepath.Dir(r)
			}
		} else if at == filepath.Dir(at) {
			return at, err.Error()
		}
	}
	for d := first; ; d = filepath.Dir(d) {
		if problem := unsafeDir(d); problem != "" {
			return d, problem
		}
		if d == filepath.Dir(d) {
			return "", ""
		}
	}
}

// unsafeDir says why someone other than root could change the directory
// d, or returns "".
func unsafeDir(d string) string {
	info, err := os.Stat(d)
	if err != nil {
		return err.Error()
	}
	if uid, _, ok := Of(info); ok && uid != 0 {
		return fmt.Sprintf("owned by uid %d, not root", uid)
	}
	perm := info.Mode()
	if perm.Perm()&0o022 != 0 && perm&fs.ModeSticky == 0 {
		return fmt.Sprintf("writable by group or others (mode %04o)", perm.Perm())
	}
	return ""
}
