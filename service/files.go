// SPDX-License-Identifier: Apache-2.0

package service

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/macake/macake/internal/fileowner"
	"github.com/macake/macake/internal/safefile"
)

// FileInfo is what an installer needs to know about a path.
type FileInfo struct {
	Mode  fs.FileMode // permission bits and type
	UID   int         // -1 when the platform does not say
	GID   int
	IsDir bool
}

// Files is the file-system side of installing a service. OSFiles is the
// real one; tests use servicetest's in-memory fake.
type Files interface {
	// Stat describes path; a missing path gives an error wrapping fs.ErrNotExist.
	Stat(path string) (FileInfo, error)
	// ReadFile returns path's content; a missing file wraps fs.ErrNotExist.
	ReadFile(path string) ([]byte, error)
	// WriteFile replaces path atomically with data, perm and owner.
	WriteFile(path string, data []byte, perm fs.FileMode, owner Owner) error
	// MkdirAll creates path and its parents with perm and owner.
	MkdirAll(path string, perm fs.FileMode, owner Owner) error
	// Remove deletes path; a missing path wraps fs.ErrNotExist.
	Remove(path string) error
}

// Owner is who a file should belong to. UID and GID -1 leave the owner to
// whoever creates the file (the user, for an agent).
type Owner struct {
	UID, GID int
	// Name is the human form, e.g. "root:wheel".
	Name string
}

// RootWheel is the owner of system launchd files; wheel is gid 0 on macOS.
var RootWheel = Owner{UID: 0, GID: 0, Name: "root:wheel"}

// RootRoot is the owner of system files on Linux.
var RootRoot = Owner{UID: 0, GID: 0, Name: "root:root"}

// CurrentUser leaves ownership to the creating (non-root) user.
var CurrentUser = Owner{UID: -1, GID: -1}

// OSFiles is Files on the real file system.
type OSFiles struct{}

// Stat implements Files.
func (OSFiles) Stat(path string) (FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FileInfo{}, err
	}
	uid, gid, _ := fileowner.Of(fi) // -1, -1 when the system does not tell
	return FileInfo{Mode: fi.Mode(), UID: uid, GID: gid, IsDir: fi.IsDir()}, nil
}

// ReadFile implements Files.
func (OSFiles) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// WriteFile implements Files: an atomic replace (temp file, fsync, rename),
// then the owner. launchd reads a plist only at bootstrap and systemd a
// unit only at daemon-reload, which come after, so neither sees the
// moment between rename and chown.
func (OSFiles) WriteFile(path string, data []byte, perm fs.FileMode, owner Owner) error {
	if err := safefile.WriteAtomic(path, data, perm); err != nil {
		return err
	}
	return chown(path, owner)
}

// MkdirAll implements Files. The last directory gets perm exactly (the
// umask does not apply) and owner.
func (OSFiles) MkdirAll(path string, perm fs.FileMode, owner Owner) error {
	if err := os.MkdirAll(path, perm); err != nil {
		return err
	}
	if err := os.Chmod(path, perm); err != nil {
		return err
	}
	return chown(path, owner)
}

// Remove implements Files.
func (OSFiles) Remove(path string) error { return os.Remove(path) }

func chown(path string, owner Owner) error {
	if owner.UID < 0 && owner.GID < 0 {
		return nil
	}
	if err := os.Chown(path, owner.UID, owner.GID); err != nil {
		return fmt.Errorf("setting owner of %s to %s: %w", path, owner.Name, err)
	}
	return nil
}
