// SPDX-License-Identifier: Apache-2.0

//go:build !(darwin || linux)

package state

import (
	"errors"
	"os"
)

// noFollow is not available here; locking fails anyway.
const noFollow = 0

// Unwritable cannot tell here.
func Unwritable(error) bool { return false }

// tryLock fails: macake changes the system only on macOS and Linux.
func tryLock(*os.File) (bool, error) {
	return false, errors.New("state locking is only implemented on macOS and Linux")
}

// tryLockShared fails as tryLock does.
func tryLockShared(f *os.File) (bool, error) { return tryLock(f) }

func unlock(*os.File) {}

// alive cannot tell here; a holder file's pid is taken at its word.
func alive(int) bool { return true }

// flockHolders cannot tell here.
func flockHolders(*os.File) ([]LockBlocker, bool) { return nil, false }
