// SPDX-License-Identifier: Apache-2.0

// Package servicetest provides an in-memory file system with owners and
// modes for tests of code that installs services, so they run anywhere
// as any user, and the checks those tests share.
package servicetest

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/macake/macake/service"
)

// fakeFile is one entry of Files.
type fakeFile struct {
	data     []byte
	mode     fs.FileMode
	uid, gid int
	dir      bool
}

// Files is an in-memory service.Files with owners and modes. Writes need
// the parent directory to exist, as on a real file system.
type Files struct {
	files map[string]*fakeFile
	// UID and GID own what is created with an Owner of -1 (the acting user).
	UID, GID int
}

// NewFiles returns a file system holding dirs (root:wheel 0755) and their parents.
func NewFiles(dirs ...string) *Files {
	f := &Files{files: map[string]*fakeFile{"/": {dir: true, mode: fs.ModeDir | 0o755}}}
	for _, d := range dirs {
		f.MkdirAll(d, 0o755, service.RootWheel)
	}
	return f
}

// AddFile puts a file at path (its directory is created), e.g. a binary.
func (f *Files) AddFile(path string, data []byte, mode fs.FileMode, uid, gid int) {
	f.MkdirAll(filepath.Dir(path), 0o755, service.RootWheel)
	f.files[filepath.Clean(path)] = &fakeFile{data: data, mode: mode, uid: uid, gid: gid}
}

// Chmod changes path's permission bits, as someone outside macake would.
func (f *Files) Chmod(path string, mode fs.FileMode) {
	e := f.files[filepath.Clean(path)]
	e.mode = e.mode&^fs.ModePerm | mode
}

// Chown changes path's owner.
func (f *Files) Chown(path string, uid, gid int) {
	e := f.files[filepath.Clean(path)]
	e.uid, e.gid = uid, gid
}

// Stat implements service.Files.
func (f *Files) Stat(path string) (service.FileInfo, error) {
	e, ok := f.files[filepath.Clean(path)]
	if !ok {
		return service.FileInfo{}, &fs.PathError{Op: "stat", Path: path, Err: fs.ErrNotExist}
	}
	return service.FileInfo{Mode: e.mode, UID: e.uid, GID: e.gid, IsDir: e.dir}, nil
}

// ReadFile implements service.Files.
func (f *Files) ReadFile(path string) ([]byte, error) {
	e, ok := f.files[filepath.Clean(path)]
	if !ok || e.dir {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return append([]byte(nil), e.data...), nil
}

func (f *Files) owner(o service.Owner) (int, int) {
	if o.UID < 0 {
		return f.UID, f.GID
	}
	return o.UID, o.GID
}

// WriteFile implements service.Files.
func (f *Files) WriteFile(path string, data []byte, perm fs.FileMode, o service.Owner) error {
	if p, ok := f.files[filepath.Dir(path)]; !ok || !p.dir {
		return &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	uid, gid := f.owner(o)
	f.files[filepath.Clean(path)] = &fakeFile{data: append([]byte(nil), data...), mode: perm, uid: uid, gid: gid}
	return nil
}

// MkdirAll implements service.Files.
func (f *Files) MkdirAll(path string, perm fs.FileMode, o service.Owner) error {
	path = filepath.Clean(path)
	if e, ok := f.files[path]; ok {
		if !e.dir {
			return fmt.Errorf("mkdir %s: not a directory", path)
		}
		return nil
	}
	if err := f.MkdirAll(filepath.Dir(path), perm, o); err != nil {
		return err
	}
	uid, gid := f.owner(o)
	f.files[path] = &fakeFile{dir: true, mode: fs.ModeDir | perm, uid: uid, gid: gid}
	return nil
}

// Remove implements service.Files.
func (f *Files) Remove(path string) error {
	if _, ok := f.files[filepath.Clean(path)]; !ok {
		return &fs.PathError{Op: "remove", Path: path, Err: fs.ErrNotExist}
	}
	delete(f.files, filepath.Clean(path))
	return nil
}

// WantRan stops the test unless ran, the steps an install or uninstall
// took as the test machine records them ("write PATH (OWNER MODE)",
// "run ARGV"), is want, in order. what names the run, e.g. "fresh
// install".
func WantRan(t testing.TB, what string, ran []string, want ...string) {
	t.Helper()
	if !slices.Equal(ran, want) {
		t.Fatalf("%s ran\n%q\nwant\n%q", what, ran, want)
	}
}
