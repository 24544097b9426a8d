// SPDX-License-Identifier: Apache-2.0

// Package safefile reads the files macake trusts (policy files, its
// settings, its state) without letting what sits at the path hang it or
// swap itself in: a named pipe, a device or a socket is refused before it
// is opened (opening a FIFO blocks until a writer comes), the open never
// blocks, and the file read is the one that was checked.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// NotRegularError says the path is not a regular file.
type NotRegularError struct {
	Path string
	// Type is the file's type bits (fs.ModeNamedPipe, fs.ModeDevice…).
	Type fs.FileMode
}

// Error names the path and what it is instead.
func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file (%s)", e.Path, Kind(e.Type))
}

// Kind names a file type in words: "a named pipe", "a directory"…
func Kind(t fs.FileMode) string {
	switch {
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a device"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t.Type() == 0:
		return "a regular file"
	}
	return "a special file"
}

// ErrTooLarge marks a file longer than the limit Read was given.
var ErrTooLarge = errors.New("file too large")

// Read returns up to limit bytes of the regular file at path (following a
// symbolic link, as a path does) and its information, taken from the open
// file. It fails with a *NotRegularError for anything else, without
// opening it, and with an error wrapping ErrTooLarge when the file holds
// more than limit bytes. Errors from the system are *fs.PathError, so
// errors.Is(err, fs.ErrNotExist) works.
func Read(path string, limit int64) ([]byte, fs.FileInfo, error) {
	before, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, before, &NotRegularError{Path: path, Type: before.Mode().Type()}
	}
	// O_NONBLOCK: if a FIFO took the file's place since the check, the
	// open returns at once instead of waiting for a writer; it means
	// nothing to a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, info, &NotRegularError{Path: path, Type: info.Mode().Type()}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, info, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, info, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
	}
	return data, info, nil
}

// WriteAtomic writes data to path via a temporary file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory.
func WriteAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync() // best effort: not every filesystem supports it
		d.Close()
	}
	return nil
}
