// SPDX-License-Identifier: Apache-2.0

//go:build darwin || linux

package state

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// noFollow keeps the lock file from being a symlink planted elsewhere.
const noFollow = unix.O_NOFOLLOW

// Unwritable reports whether err says the disk cannot take a write: it
// is read-only, full, or the user's quota is used up.
func Unwritable(err error) bool {
	return errors.Is(err, unix.EROFS) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// tryLock takes an exclusive flock on f without blocking; ok is false when
// another open file description holds it.
func tryLock(f *os.File) (ok bool, err error) { return flockNB(f, unix.LOCK_EX) }

// tryLockShared takes a shared flock on f without blocking, which works on
// a file opened read-only; ok is false when someone holds it exclusively.
func tryLockShared(f *os.File) (ok bool, err error) { return flockNB(f, unix.LOCK_SH) }

// flockNB takes the flock how (LOCK_EX or LOCK_SH) without blocking,
// retrying when a signal interrupts it.
func flockNB(f *os.File, how int) (ok bool, err error) {
	for {
		err = unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}

func unlock(f *os.File) { unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// alive reports whether process pid exists (a process of another user
// answers EPERM, which still means it exists).
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
