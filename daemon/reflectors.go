// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/macake/macake/logging"
)

// How the daemon reports a link's reflectors and stalls: once per
// episode, not once per event.
const (
	// stallReportAfter is how long a stall must last before it is logged
	// (and then its end too). With a reflector or two answering, the
	// controller stalls and resumes every few hundred milliseconds, and
	// each pair said nothing a person could act on (issue 27: 74 pairs in
	// 5 minutes); status shows the state as it is.
	stallReportAfter = 5 * time.Second
	// silentAfter is how long probing may go without a single reply
	// before the daemon says, once, that no reflector answers; until a
	// reply comes, replacements are not logged one by one (the
	// controller spaces them out meanwhile: SilentBackoff).
	silentAfter = 10 * time.Second
)

// quietEvents returns events whose Info lines go to the log at Debug: the
// changes a reconcile makes because a controller replaced a reflector,
// which that replacement's own line already tells.
func quietEvents(log *slog.Logger) logging.Events {
	return logging.Events{Log: slog.New(logging.Demote(log.Handler()))}
}

// episodes is what a runner remembers to report stalls and silence once
// per episode; touched only by the runner's goroutine.
type episodes struct {
	// started is when the runner started; lastReply when its prober
	// last delivered a reply.
	started, lastReply time.Time
	// stallAt is when the controller stalled (zero: it is not stalled),
	// stallSilent how long it had had no response then, stallLogged
	// whether the stall was logged.
	stallAt     time.Time
	stallSilent time.Duration
	stallLogged bool
	// silent: no reflector has answered for silentAfter; swapped counts
	// the replacements since.
	silent  bool
	swapped int
}

// stalled notes that the controller stalled, silent after its last
// response; it is logged only if it lasts (noteTime).
func (r *linkRunner) stalled(now time.Time, silent time.Duration) {
	r.ep.stallAt, r.ep.stallSilent, r.ep.stallLogged = now, silent, false
}

// resumed notes the end of a stall, logging it when its start was.
func (r *linkRunner) resumed(ctx context.Context, down, up int64) {
	if r.ep.stallLogged {
		r.d.ev.Resume(ctx, r.name, down, up)
	} else {
		r.d.log.Debug("controller resumed after a short stall", logging.KeyLink, r.name)
	}
	r.ep.stallAt, r.ep.stallLogged = time.Time{}, false
}

// replied notes a reply; it ends a silence, which is said.
func (r *linkRunner) replied(ctx context.Context, now time.Time) {
	r.ep.lastReply = now
	if !r.ep.silent {
		return
	}
	r.ep.silent = false
	r.d.ev.ReflectorsAnswer(ctx, r.name, r.ep.swapped)
}

// noteTime logs what has lasted long enough to be worth a line: a stall
// past stallReportAfter, and probing without a reply past silentAfter.
// paused says whether probing is paused (the controller sleeps).
func (r *linkRunner) noteTime(ctx context.Context, now time.Time, paused bool) {
	if !r.ep.stallAt.IsZero() && !r.ep.stallLogged && now.Sub(r.ep.stallAt) >= stallReportAfter {
		r.ep.stallLogged = true
		r.d.ev.Stall(ctx, r.name, r.ep.stallSilent+now.Sub(r.ep.stallAt))
	}
	since := r.ep.lastReply
	if since.IsZero() {
		since = r.ep.started
	}
	if r.ep.silent || paused || r.probe == nil || now.Sub(since) < silentAfter {
		return
	}
	r.ep.silent, r.ep.swapped = true, 0
	r.d.ev.ReflectorsSilent(ctx, r.name, len(r.probes), now.Sub(since),
		"the network may block ICMP to public resolvers: list reflectors that answer in [autorate] reflectors (macake doctor shows which do)")
}
