// SPDX-License-Identifier: Apache-2.0

// Package measurerecord records a measured profile in the state file for
// `macake measure` (Record): under the state lock like every other writer,
// or, while `macake watch` holds the lock, handed to the daemon over its
// status socket.
package measurerecord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/state"
)

// lockTries bounds how often Record goes between the state lock and the
// daemon's socket: a starting watch holds the lock before it answers, a
// stopping one stops answering before it lets go.
const lockTries = 3

// lockWait is how long Record waits for a one-shot command's lock (tests
// shorten it).
var lockWait = state.DefaultLockWait

// Record writes the measured profile m under key to the state file in
// stateDir the way every other writer does, under the state lock, so that
// no update is lost and none interleaves (an apply that read the state
// before measure wrote would otherwise save it back without the profile,
// and measure could write back a pf token apply just replaced). The lock
// is held only for the read-modify-write; an apply or down holding it is
// waited for, as they wait for each other. macake watch holds the lock for
// its whole life: then Record hands m to the daemon over
// STATE_DIR/watch.sock, and the daemon saves it (and uses it at once);
// viaWatch says so. warn hears about a corrupt state file, which is
// rebuilt.
func Record(ctx context.Context, stateDir, key string, m state.Profile, warn io.Writer) (viaWatch bool, err error) {
	wait := time.Duration(0) // first find out at once whether watch holds it
	for try := 1; ; try++ {
		lock, err := state.AcquireLock(ctx, stateDir, state.LockOptions{Wait: wait, MayCreate: true, SkipOwnershipCheck: os.Geteuid() != 0})
		if err == nil {
			defer lock.Release()
			st, err := state.Load(stateDir)
			if err != nil {
				if !errors.Is(err, state.ErrCorrupt) {
					return false, err
				}
				fmt.Fprintf(warn, "warning: %v\n", err)
				if aside, err := state.SetAside(stateDir); err == nil {
					fmt.Fprintf(warn, "warning: a copy of the corrupt state file is kept in %s\n", aside)
				}
			}
			st.RecordMeasurement(key, m)
			return false, state.Save(stateDir, st)
		}
		var locked *state.LockedError
		if !errors.As(err, &locked) || try >= lockTries && locked.Holder != state.HolderWatch {
			return false, err
		}
		wait = lockWait
		if locked.Holder != state.HolderWatch {
			continue // an apply or down: wait for it as they wait for each other
		}
		err = statusapi.SendMeasurement(ctx, statusapi.SocketPath(stateDir), statusapi.Measurement{Key: key, Profile: m})
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, statusapi.ErrNotRunning) && try < lockTries:
			continue // starting or stopping: try the lock again
		}
		pid := ""
		if locked.PID > 0 {
			pid = fmt.Sprintf(" (pid %d)", locked.PID)
		}
		return false, fmt.Errorf("macake watch%s holds the state lock, and handing it the measurement failed: %w", pid, err)
	}
}
