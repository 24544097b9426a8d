// SPDX-License-Identifier: Apache-2.0

//go:build darwin || linux

package doctor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/macake/macake/reconcile"
)

// LockProbe finds a running `macake watch` through the state lock
// (reconcile.Lock): watch holds an exclusive flock on it for as long as it
// runs and writes "PID watch" into it. Probing takes a shared lock for an
// instant when nobody holds it, which only ever delays another macake by
// one retry; it needs read access only, so it works without root.
type LockProbe struct{}

// Watch implements WatchProbe.
func (LockProbe) Watch(_ context.Context, stateDir string) (WatchState, error) {
	path := filepath.Join(stateDir, reconcile.LockFileName)
	s := WatchState{Via: "the state lock " + path}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil // nothing ever ran here
	case err != nil:
		return s, err
	}
	defer f.Close()
	held := false
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		break
	}
	switch {
	case err == nil:
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
	case errors.Is(err, unix.EWOULDBLOCK):
		held = true
	default:
		return s, err
	}
	if !held {
		return s, nil
	}
	b, _ := os.ReadFile(path)
	s.PID, s.Holder = ParseLockHolder(string(b))
	s.Running = s.Holder == HolderWatch
	return s, nil
}
