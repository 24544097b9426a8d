// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxPause bounds a pause: one that asks for longer is refused, so that a
// client that forgets to resume cannot leave a link unshaped for long.
const MaxPause = 30 * time.Minute

// pauseRequest asks the loop to take macake's shaping off until a time
// (zero: put it back now).
type pauseRequest struct {
	until time.Time
	reply chan error
}

// Pause takes macake's shaping off for d, as if no policy matched, and
// puts it back by itself when d has passed; d ≤ 0 puts it back now.
// `macake bench --compare` uses it for its unshaped runs while watch runs
// (it holds the state lock, so bench cannot apply or tear down itself);
// the lease means a bench that dies cannot leave the link unshaped. It
// returns once the reconcile that removes (or restores) the shaping is
// done, with its error. Safe to call from any goroutine.
func (d *Daemon) Pause(ctx context.Context, dur time.Duration) error {
	if dur > MaxPause {
		return fmt.Errorf("a pause of %v is longer than the %v macake watch allows", dur, MaxPause)
	}
	req := pauseRequest{reply: make(chan error, 1)}
	if dur > 0 {
		req.until = time.Now().Add(dur)
	}
	select {
	case d.pauseReqs <- req:
	case <-d.stopped:
		return errors.New("macake watch is stopping")
	case <-ctx.Done():
		return fmt.Errorf("macake watch is busy: %w", ctx.Err())
	}
	return <-req.reply
}

// paused reports whether shaping is paused now.
func (d *Daemon) paused() bool { return !d.pausedUntil.IsZero() && time.Now().Before(d.pausedUntil) }

// setPause carries out a pause request on the loop's goroutine: it
// records the end, arms the timer that ends it, and reconciles.
func (d *Daemon) setPause(ctx context.Context, req pauseRequest, timer *time.Timer) error {
	was := d.paused()
	d.pausedUntil = req.until
	timer.Stop()
	trigger := "resume"
	if req.until.IsZero() {
		if was {
			d.log.Info("shaping resumed on request")
		}
	} else {
		trigger = "pause"
		timer.Reset(time.Until(req.until))
		d.log.Info("shaping paused on request; it resumes by itself at the end", "until", req.until.UTC().Format(time.RFC3339))
	}
	d.pass(ctx, trigger)
	if a := d.rec.lastApply; a != nil && a.err != nil {
		return a.err
	}
	return nil
}

// pauseEnded resumes shaping when a pause ran out.
func (d *Daemon) pauseEnded(ctx context.Context) {
	if d.pausedUntil.IsZero() {
		return
	}
	d.pausedUntil = time.Time{}
	d.log.Info("the pause ran out; shaping resumed")
	d.pass(ctx, "resume")
}
