// SPDX-License-Identifier: Apache-2.0

// Package pauses is the bookkeeping of the pauses of a running watch: the
// leases in force by link (Leases: which links a pause holds and why,
// which ran out, when the next ends, how status shows them) and the
// token bucket that bounds pause and resume requests (Limiter). The
// daemon's SetPause is the one entry point that changes them.
package pauses

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/daemon/statusbuild"
	"github.com/macake/macake/state"
)

// The bounds of pause and resume requests: Burst at once, then one every
// Refill. Each change reconciles on the loop's goroutine, which the
// controllers' rate changes wait for, so a flood beyond this is refused at
// the door, before it reaches the loop.
const (
	// Burst is how many requests are taken at once.
	Burst = 3
	// Refill is how often one more is taken after the burst.
	Refill = 5 * time.Second
)

// Leases are the pauses of the shaping in force, by the state file's key
// (Key: a link's name, or state.AllLinks for every link). They are
// touched on the loop's goroutine only.
type Leases map[string]state.Pause

// Key is the state file's key of a pause of link ("" every link).
func Key(link string) string {
	if link == "" {
		return state.AllLinks
	}
	return link
}

// LinkOfKey names a pause's link for the log: "*" is every link.
func LinkOfKey(key string) string {
	if key == state.AllLinks {
		return "every link"
	}
	return key
}

// Start records a pause of key from now for d, by whom: asking again while
// paused moves the end, and the pause still began when it first did.
func (l Leases) Start(key string, now time.Time, d time.Duration, by string) state.Pause {
	p := state.Pause{Since: now, Until: now.Add(d), By: by}
	if old, ok := l[key]; ok {
		p.Since = old.Since // an extension: it began then
	}
	l[key] = p
	return p
}

// Paused says, for each of links that a pause holds at now, why
// (desired.Inputs.Paused).
func (l Leases) Paused(now time.Time, links []config.Link) map[string]string {
	out := map[string]string{}
	for _, pl := range links {
		if p, ok := l.Of(pl.Name, now); ok {
			out[pl.Name] = Reason(p)
		}
	}
	return out
}

// Of returns the pause that holds link at now: its own or every link's,
// whichever ends later.
func (l Leases) Of(link string, now time.Time) (state.Pause, bool) {
	var found state.Pause
	ok := false
	for _, key := range []string{link, state.AllLinks} {
		if p, has := l[key]; has && p.InForce(now) && (!ok || p.Until.After(found.Until)) {
			found, ok = p, true
		}
	}
	return found, ok
}

// Reason is why a paused link is not shaped, as plans and the log say it.
func Reason(p state.Pause) string {
	why := "paused until " + p.Until.Local().Format("15:04:05")
	if p.By != "" {
		why = "paused by " + p.By + " until " + p.Until.Local().Format("15:04:05")
	}
	return why
}

// Expire forgets the pauses that ended by now and returns them, by key.
func (l Leases) Expire(now time.Time) map[string]state.Pause {
	var ended map[string]state.Pause
	for key, p := range l {
		if !p.InForce(now) {
			if ended == nil {
				ended = map[string]state.Pause{}
			}
			ended[key] = p
			delete(l, key)
		}
	}
	return ended
}

// NextEnd is when the first pause to end ends (zero: none is held).
func (l Leases) NextEnd() time.Time {
	var next time.Time
	for _, p := range l {
		if next.IsZero() || p.Until.Before(next) {
			next = p.Until
		}
	}
	return next
}

// Status lists the pauses in force at now for status, every link's
// first.
func (l Leases) Status(now time.Time) []statusapi.Pause {
	out := []statusapi.Pause{}
	keys := slices.Sorted(maps.Keys(l)) // "*" sorts before any name
	for _, key := range keys {
		if p := l[key]; p.InForce(now) {
			out = append(out, *statusbuild.Pause(key, p, now))
		}
	}
	return out
}

// SameLinks reports whether a and b (Paused's answers) name the same
// links.
func SameLinks(a, b map[string]string) bool {
	return slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
}

// UnknownLink is the error of a pause of a link no policy names.
func UnknownLink(link string, policies []string) error {
	list := "there are none"
	if len(policies) > 0 {
		list = "the policies are " + strings.Join(policies, ", ")
	}
	return fmt.Errorf("no policy is named %q; %s", link, list)
}

// Limiter is a token bucket of pause and resume requests: Burst tokens,
// one more every Refill. It counts the refused ones, to log them once a
// minute rather than once each. The zero Limiter is full; it is safe for
// concurrent use.
type Limiter struct {
	mu      sync.Mutex
	tokens  float64
	at      time.Time
	denied  int
	lastLog time.Time
}

// Take spends a token at now, or says how long until one is there.
func (l *Limiter) Take(now time.Time) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at.IsZero() {
		l.tokens, l.at = Burst, now
	}
	if now.After(l.at) {
		l.tokens = min(Burst, l.tokens+float64(now.Sub(l.at))/float64(Refill))
		l.at = now
	}
	if l.tokens >= 1 {
		l.tokens--
		return 0, true
	}
	l.denied++
	return time.Duration((1 - l.tokens) * float64(Refill)), false
}

// Refused logs the refused requests, at most once a minute; c is the
// last one.
func (l *Limiter) Refused(log *slog.Logger, c statusapi.PauseChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.lastLog) < time.Minute {
		return
	}
	log.Warn("refusing pause and resume requests: too many at once", "refused", l.denied, "last_by", c.By,
		"limit", fmt.Sprintf("%d at once, then one every %v", Burst, Refill))
	l.lastLog, l.denied = now, 0
}
