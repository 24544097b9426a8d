// SPDX-License-Identifier: Apache-2.0

// Package watchswitch takes a running `macake watch`'s shaping off and
// puts it back over its status socket (Switch), for `macake bench
// --compare`, which measures the link with and without it.
package watchswitch

import (
	"context"
	"fmt"
	"time"

	"github.com/macake/macake/daemon/statusapi"
)

// Switch takes the shaping of a running `macake watch` off and puts
// it back over its status socket (statusapi.RequestPause: the pause of
// every link, the daemon's SetPause), for `macake bench --compare`
// (measure.ShapingSwitch). Root and the operator group, as the daemon
// checks.
type Switch struct {
	// Socket is the daemon's status socket.
	Socket string
	// Wait bounds how long On waits for the shapers to be back; 0 is 30 s.
	Wait time.Duration
}

// Off pauses the daemon's shaping for lease; the daemon resumes by itself
// when it runs out.
func (w Switch) Off(ctx context.Context, lease time.Duration) error {
	_, err := statusapi.SendPause(ctx, w.Socket, "", lease)
	return err
}

// On ends the pause and returns once every active link the daemon shapes
// has its shapers and its controller back.
func (w Switch) On(ctx context.Context) error {
	if _, err := statusapi.SendPause(ctx, w.Socket, "", 0); err != nil {
		return err
	}
	wait := w.Wait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		st, err := statusapi.Fetch(ctx, w.Socket)
		if err == nil && shapingBack(st) {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d active links, not all shaped", len(st.Links))
			}
			return fmt.Errorf("macake watch did not put the shaping back within %v: %w", wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// shapingBack reports whether a status shows the shaping in place: not
// paused, and every active link that should be shaped is, with its
// controller (a balanced link that is released counts as in place).
func shapingBack(st statusapi.Status) bool {
	if !st.Daemon.PausedUntil.IsZero() {
		return false
	}
	for _, l := range st.Links {
		c := l.Controller
		released := c != nil && l.Mode == "balanced" && !c.Engaged
		if l.Error == nil && !l.Shaped && !released && l.Mode != "off" {
			return false
		}
	}
	return true
}
