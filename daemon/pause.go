// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/daemon/pauses"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/daemon/statusbuild"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/state"
)

// The bounds of pausing.
const (
	// MaxPause bounds a pause: one that asks for longer is refused, so
	// that a forgotten pause cannot leave a link unshaped for longer.
	MaxPause = settings.MaxPause
	// PauseBurst and PauseRefill bound the pause and resume requests the
	// daemon takes: PauseBurst at once, then one every PauseRefill
	// (pauses.Limiter).
	PauseBurst  = pauses.Burst
	PauseRefill = pauses.Refill
)

// pauseRequest is a pause or resume on its way to the loop.
type pauseRequest struct {
	change statusapi.PauseChange
	reply  chan pauseReply
}

type pauseReply struct {
	pause *statusapi.Pause
	err   error
}

// ErrTooManyPauses marks a pause or resume refused because too many came
// at once (PauseBurst, PauseRefill).
var ErrTooManyPauses = errors.New("too many pause and resume requests")

// SetPause is the one way to pause and resume macake's shaping, whoever
// asks: `macake pause` and `resume` and `macake bench --compare` over the
// status socket, the status page's buttons, and an MQTT switch.
//
// With c.For > 0 it takes the shaping of c.Link (every link when "") off
// for c.For, at most MaxPause: the link's pipes or qdiscs are removed, its
// controller stops (saving what it learnt), and it stays the active link
// of its interface, so no other policy takes its place. The shaping comes
// back by itself when the time is up; the pause is kept in the state file,
// so it survives a restart of watch until then (never past its end: see
// state.Pause.InForce). Asking again while paused moves the end. With
// c.For == 0 it resumes: c.Link's own pause, or with c.Link "" every
// pause.
//
// It returns once the reconcile that removes or restores the shaping is
// done, with the pause of c.Link in force after it (nil: none) and the
// reconcile's error. A link no policy names, a resume of one link while
// every link is paused, and requests beyond PauseBurst at once and one a
// PauseRefill after (ErrTooManyPauses) are refused with an error that
// says what to do. Safe to call from any goroutine.
func (d *Daemon) SetPause(ctx context.Context, c statusapi.PauseChange) (*statusapi.Pause, error) {
	switch {
	case c.For < 0:
		return nil, fmt.Errorf("a pause of %v: give a positive length, or resume", c.For)
	case c.For > MaxPause:
		return nil, fmt.Errorf("a pause of %v is longer than the %v macake watch allows", c.For, MaxPause)
	case c.Link != "" && !config.ValidLinkName(c.Link):
		return nil, fmt.Errorf("%q cannot name a link (lower-case letters, digits, - and _, at most 32)", c.Link)
	}
	if c.Link != "" {
		// A name no policy has is refused before it costs a turn (the
		// loop checks again against the policies in force then).
		pols := d.pub.Load().status.Policies
		if !slices.ContainsFunc(pols, func(p statusapi.Policy) bool { return p.Name == c.Link }) {
			names := make([]string, len(pols))
			for i, p := range pols {
				names[i] = p.Name
			}
			return nil, pauses.UnknownLink(c.Link, names)
		}
	}
	if wait, ok := d.pauseLimit.Take(time.Now()); !ok {
		d.pauseLimit.Refused(d.log, c)
		return nil, fmt.Errorf("%w: macake watch takes %d at once and one every %v after; try again in %v",
			ErrTooManyPauses, PauseBurst, PauseRefill, wait.Round(100*time.Millisecond))
	}
	req := pauseRequest{change: c, reply: make(chan pauseReply, 1)}
	select {
	case d.pauseReqs <- req:
	case <-d.stopped:
		return nil, errors.New("macake watch is stopping")
	case <-ctx.Done():
		return nil, fmt.Errorf("macake watch is busy: %w", ctx.Err())
	}
	r := <-req.reply
	return r.pause, r.err
}

// loadPauses takes in the pauses the state file kept from before a
// restart: those still in force hold on, the others are dropped.
func (d *Daemon) loadPauses(now time.Time) {
	d.pauses = pauses.Leases{}
	kept := d.cfg.Tokens.State.Pauses
	for _, key := range slices.Sorted(maps.Keys(kept)) {
		p := kept[key]
		switch {
		case p.InForce(now):
			d.pauses[key] = p
			d.log.Info("shaping stays paused, as it was before watch started", logging.KeyLink, pauses.LinkOfKey(key),
				"until", p.Until.UTC().Format(time.RFC3339), "by", p.By)
		case now.Before(p.Since):
			d.log.Warn("dropping a pause that begins after the clock's time: the clock was set back, so how long it ran cannot be told",
				logging.KeyLink, pauses.LinkOfKey(key), "since", p.Since.UTC().Format(time.RFC3339))
		}
	}
	if len(d.pauses) != len(kept) || len(d.pauses) > 0 {
		d.pausesChanged()
	}
}

// pausesChanged writes the pauses to the state file, so that they
// survive a restart (a failure is logged: the pause holds until watch
// stops), and to the metrics.
func (d *Daemon) pausesChanged() {
	if m := d.cfg.Metrics; m != nil {
		ends := map[string]time.Time{}
		for key, p := range d.pauses {
			ends[key] = p.Until
		}
		m.SetPauses(ends)
	}
	kept := map[string]state.Pause(maps.Clone(d.pauses))
	if len(kept) == 0 {
		kept = nil
	}
	if err := d.cfg.Tokens.Update(func(st *state.State) { st.Pauses = kept }); err != nil {
		d.log.Error("saving the pauses in the state file; they end if watch restarts", logging.KeyError, err)
	}
}

// setPause carries out a pause request on the loop's goroutine: it
// records the pause (or removes it), saves it, arms the timer that ends
// it, and reconciles when which links are paused changed.
func (d *Daemon) setPause(ctx context.Context, req pauseRequest, timer *time.Timer) pauseReply {
	c, now := req.change, time.Now()
	d.expirePauses(now)
	links := d.policies.links()
	if c.Link != "" && !slices.ContainsFunc(links, func(l config.Link) bool { return l.Name == c.Link }) {
		names := make([]string, len(links))
		for i, l := range links {
			names[i] = l.Name
		}
		return pauseReply{err: pauses.UnknownLink(c.Link, names)}
	}
	before := d.pauses.Paused(now, links)
	key := pauses.Key(c.Link)
	switch {
	case c.For > 0:
		p := d.pauses.Start(key, now, c.For, c.By)
		d.log.Info("shaping paused on request; it resumes by itself at the end", logging.KeyLink, pauses.LinkOfKey(key),
			"until", p.Until.UTC().Format(time.RFC3339), "by", c.By)
	case c.Link == "":
		if len(d.pauses) > 0 {
			d.log.Info("shaping resumed on request", logging.KeyLink, "every link", "by", c.By)
		}
		clear(d.pauses)
	default:
		if all, ok := d.pauses[state.AllLinks]; ok {
			return pauseReply{err: fmt.Errorf("every link is paused (until %s); resume them all without naming a link",
				all.Until.Local().Format("15:04:05"))}
		}
		if _, ok := d.pauses[key]; ok {
			d.log.Info("shaping resumed on request", logging.KeyLink, c.Link, "by", c.By)
		}
		delete(d.pauses, key)
	}
	d.pausesChanged()
	d.armPauseEnd(timer, now)
	reply := pauseReply{}
	if c.Link == "" {
		if p, ok := d.pauses[state.AllLinks]; ok {
			reply.pause = statusbuild.Pause(state.AllLinks, p, now)
		}
	} else if p, ok := d.pauses.Of(c.Link, now); ok {
		reply.pause = statusbuild.Pause(c.Link, p, now)
	}
	if pauses.SameLinks(before, d.pauses.Paused(now, links)) {
		d.publish()
		return reply
	}
	trigger := "resume"
	if c.For > 0 {
		trigger = "pause"
	}
	d.pass(ctx, trigger)
	if a := d.rec.lastApply; a != nil && a.err != nil {
		reply.err = a.err
	}
	return reply
}

// expirePauses forgets the pauses that ended by now and reports whether
// any did.
func (d *Daemon) expirePauses(now time.Time) bool {
	ended := d.pauses.Expire(now)
	for key, p := range ended {
		d.log.Info("the pause ran out; shaping resumed", logging.KeyLink, pauses.LinkOfKey(key), "by", p.By)
	}
	return len(ended) > 0
}

// armPauseEnd sets timer to the end of the first pause to end.
func (d *Daemon) armPauseEnd(timer *time.Timer, now time.Time) {
	timer.Stop()
	if next := d.pauses.NextEnd(); !next.IsZero() {
		timer.Reset(max(next.Sub(now), 0))
	}
}

// pauseEnded resumes the shaping of the pauses that ran out.
func (d *Daemon) pauseEnded(ctx context.Context, timer *time.Timer) {
	now := time.Now()
	if d.expirePauses(now) {
		d.pausesChanged()
		d.pass(ctx, "resume")
	}
	d.armPauseEnd(timer, now)
}
