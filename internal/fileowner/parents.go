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

// UnsafeDir is UnsafeAncestor for a directory root keeps files in (the
// state directory, the log file's directory), and the directory itself
// too: it must be a directory owned by root and writable by nobody else,
// sticky or not (in a directory others may write, they can put a file or
// a link where root would create one; the sticky bit only keeps them from
// removing root's). A directory that does not exist yet passes when the
// one it would be made in does. It returns the directory at fault and
// what is wrong with it, or "" and "".
func UnsafeDir(dir string) (at, problem string) {
	if d, p := UnsafeAncestor(dir); d != "" {
		return d, p
	}
	info, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		return "", ""
	case err != nil:
		return dir, err.Error()
	case !info.IsDir():
		return dir, "not a directory"
	}
	if uid, _, ok := Of(info); ok && uid != 0 {
		return dir, fmt.Sprintf("owned by uid %d, not root", uid)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return dir, fmt.Sprintf("writable by group or others (mode %04o)", perm)
	}
	return "", ""
}
