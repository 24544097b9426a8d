// SPDX-License-Identifier: Apache-2.0

package machine

import (
	"context"
	"path/filepath"

	"github.com/macake/macake/doctor"
	"github.com/macake/macake/state"
)

// LockProbe finds a running `macake watch` through the state lock
// (state.Holder): watch holds an exclusive flock on it for as long as
// it runs and writes "PID watch" into it and into the holder file beside
// it. As root, probing takes a shared lock for an instant when nobody
// holds it, which only ever delays another macake by one retry; without
// root, which may not open the lock, it reads the holder file and asks
// whether that pid runs.
type LockProbe struct{}

// Watch implements doctor.WatchProbe.
func (LockProbe) Watch(_ context.Context, stateDir string) (doctor.WatchState, error) {
	s := doctor.WatchState{Via: "the state lock " + filepath.Join(stateDir, state.LockFileName)}
	pid, holder, held, err := state.Holder(stateDir)
	if err != nil || !held {
		return s, err
	}
	s.PID, s.Holder, s.Running = pid, holder, holder == state.HolderWatch
	return s, nil
}
