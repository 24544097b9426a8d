// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"path/filepath"

	"github.com/macake/macake/reconcile"
)

// LockProbe finds a running `macake watch` through the state lock
// (reconcile.Holder): watch holds an exclusive flock on it for as long as
// it runs and writes "PID watch" into it and into the holder file beside
// it. As root, probing takes a shared lock for an instant when nobody
// holds it, which only ever delays another macake by one retry; without
// root, which may not open the lock, it reads the holder file and asks
// whether that pid runs.
type LockProbe struct{}

// Watch implements WatchProbe.
func (LockProbe) Watch(_ context.Context, stateDir string) (WatchState, error) {
	s := WatchState{Via: "the state lock " + filepath.Join(stateDir, reconcile.LockFileName)}
	pid, holder, held, err := reconcile.Holder(stateDir)
	if err != nil || !held {
		return s, err
	}
	s.PID, s.Holder, s.Running = pid, holder, holder == reconcile.HolderWatch
	return s, nil
}
