// SPDX-License-Identifier: Apache-2.0

//go:build !darwin && !linux

package doctor

import (
	"context"
	"errors"
)

// LockProbe cannot tell on this system: macake runs on macOS and Linux.
type LockProbe struct{}

// Watch implements WatchProbe.
func (LockProbe) Watch(context.Context, string) (WatchState, error) {
	return WatchState{}, errors.New("macake watch runs on macOS and Linux only")
}
