// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/macake/macake/internal/fileowner"
	"github.com/macake/macake/internal/safefile"
)

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
// then the owner. launchd reads the plist only at bootstrap, which comes
// after, so it never sees the moment between rename and chown.
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
