// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

// TestWatchPause: a pause of every link takes macake's shaping off (no
// pipes, no controllers; the link stays active and status says until
// when, with the time left) and the daemon puts it back by itself when
// the pause runs out, or at once when asked.
func TestWatchPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		ctx := context.Background()
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) {
			t.Fatalf("pipes at start: %v", got)
		}
		p, err := r.d.SetPause(ctx, statusapi.PauseChange{For: time.Minute, By: "alice"})
		if err != nil || p == nil || p.Link != statusapi.AllLinks || p.By != "alice" || p.RemainingSeconds != 60 {
			t.Fatalf("pause: %+v %v", p, err)
		}
		synctest.Wait()
		if got := r.pipes(); len(got) != 0 || len(r.anchorRules()) != 0 {
			t.Fatalf("while paused: pipes %v, rules %v", got, r.anchorRules())
		}
		time.Sleep(20 * time.Second)
		st := r.d.Status()
		if st.Daemon.PausedUntil.IsZero() || len(st.Pauses) != 1 || st.Pauses[0].RemainingSeconds != 40 || st.Pauses[0].By != "alice" {
			t.Errorf("status while paused: paused until %v, pauses %+v", st.Daemon.PausedUntil, st.Pauses)
		}
		if len(st.Links) != 1 || st.Links[0].Shaped || st.Links[0].Controller != nil || !st.Links[0].PausedUntil.Equal(st.Daemon.PausedUntil) || len(st.Problems) != 0 {
			t.Errorf("the paused link: %+v, problems %q", st.Links, st.Problems)
		}
		end := fmt.Sprintf(`macake_pause_end_timestamp_seconds{link="*"} %s`, strconv.FormatFloat(float64(st.Daemon.PausedUntil.UnixNano())/1e9, 'g', -1, 64))
		if m := r.scrape(); !strings.Contains(m, end) {
			t.Errorf("the metrics lack %s:\n%s", end, grepLines(m, "pause"))
		}
		time.Sleep(39 * time.Second)
		synctest.Wait()
		if got := r.pipes(); len(got) != 0 {
			t.Fatalf("pipes back before the pause ran out: %v", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) || r.d.Status().Links[0].Controller == nil {
			t.Fatalf("after the pause ran out: pipes %v\n%s", got, r.log)
		}
		if st := r.d.Status(); !st.Daemon.PausedUntil.IsZero() || len(st.Pauses) != 0 || !st.Links[0].PausedUntil.IsZero() {
			t.Errorf("status after the pause: %v %+v", st.Daemon.PausedUntil, st.Pauses)
		}
		if r.d.cfg.Tokens.State.Pauses != nil {
			t.Errorf("the state file keeps an ended pause: %+v", r.d.cfg.Tokens.State.Pauses)
		}
		if m := r.scrape(); strings.Contains(m, "macake_pause_end_timestamp_seconds{") {
			t.Errorf("the metrics keep an ended pause:\n%s", grepLines(m, "pause"))
		}

		// Asked to resume early, it does at once.
		time.Sleep(2 * PauseRefill) // not a flood
		if _, err := r.d.SetPause(ctx, statusapi.PauseChange{For: 10 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		if p, err := r.d.SetPause(ctx, statusapi.PauseChange{By: "bob"}); err != nil || p != nil {
			t.Fatalf("resume: %+v %v", p, err)
		}
		synctest.Wait()
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) {
			t.Errorf("pipes after resuming early: %v", got)
		}
		for _, want := range []string{"shaping paused on request", "by=alice", "shaping resumed on request", "by=bob", "the pause ran out; shaping resumed"} {
			if !strings.Contains(r.log.String(), want) {
				t.Errorf("the log lacks %q", want)
			}
		}
	})
}

// twoLinks are two links on two interfaces, and a catch-all policy on
// en0 that loses to home.
var twoLinks = map[string]string{
	"home": autorateLink,
	"spare": `[match]
interface = "en0"
priority = -10
[shaper]
mode = "fixed"
download = "5mbit"
upload = "1mbit"
`,
	"tether": `[match]
interface = "en1"
[shaper]
mode = "fixed"
download = "30mbit"
upload = "10mbit"
[autorate]
reflectors = ["127.0.0.12"]
`,
}

func twoInterfaces() linkfacts.Facts {
	f := factsOn("en0", homeMAC)
	en1 := linkfacts.InterfaceFacts{Name: "en1", Up: true, GatewayIP: netip.MustParseAddr("172.20.10.1")}
	f.Interfaces = append(f.Interfaces, en1)
	return f
}

// TestWatchPauseOneLink: a link's own pause takes only its shaping off;
// the catch-all policy on its interface does not take its place; the
// other link keeps its pipes and controller. Resuming one link while
// every link is paused, a link no policy names and a pause longer than
// MaxPause are refused with what to do.
func TestWatchPauseOneLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, twoLinks, nil, twoInterfaces())
		ctx := context.Background()
		before := r.pipes()
		if len(before) != 4 {
			t.Fatalf("pipes at start: %v\n%s", before, r.log)
		}
		p, err := r.d.SetPause(ctx, statusapi.PauseChange{Link: "home", For: 15 * time.Minute, By: "alice"})
		if err != nil || p == nil || p.Link != "home" {
			t.Fatalf("pause home: %+v %v", p, err)
		}
		synctest.Wait()
		st := r.d.Status()
		var home, tether statusapi.Link
		for _, l := range st.Links {
			switch l.Name {
			case "home":
				home = l
			case "tether":
				tether = l
			case "spare":
				t.Errorf("the catch-all policy took the paused link's interface: %+v", l)
			}
		}
		if home.Shaped || home.PausedUntil.IsZero() || home.Controller != nil || !tether.Shaped || tether.Controller == nil || !tether.PausedUntil.IsZero() {
			t.Errorf("after pausing home: home %+v\ntether %+v", home, tether)
		}
		if got := r.pipes(); len(got) != 2 || slices.Contains(got, 48001) || slices.Contains(got, 48002) {
			t.Errorf("pipes with home paused: %v (before %v)", got, before)
		}
		if !strings.Contains(r.log.String(), "paused by alice until") {
			t.Errorf("the removal does not say why:\n%s", r.log)
		}
		if _, err := r.d.SetPause(ctx, statusapi.PauseChange{Link: "hotel", For: time.Minute}); err == nil || !strings.Contains(err.Error(), `no policy is named "hotel"; the policies are home, spare, tether`) {
			t.Errorf("an unknown link: %v", err)
		}
		if _, err := r.d.SetPause(ctx, statusapi.PauseChange{For: 25 * time.Hour}); err == nil || !strings.Contains(err.Error(), "longer than the 24h0m0s") {
			t.Errorf("a pause of a day and an hour: %v", err)
		}
		if _, err := r.d.SetPause(ctx, statusapi.PauseChange{Link: "Home!", For: time.Minute}); err == nil || !strings.Contains(err.Error(), "cannot name a link") {
			t.Errorf("a bad name: %v", err)
		}
		time.Sleep(2 * PauseRefill) // not a flood
		if _, err := r.d.SetPause(ctx, statusapi.PauseChange{For: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.d.SetPause(ctx, statusapi.PauseChange{Link: "tether"}); err == nil || !strings.Contains(err.Error(), "every link is paused") {
			t.Errorf("resuming one link of all: %v", err)
		}
		if _, err := r.d.SetPause(ctx, statusapi.PauseChange{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := r.pipes(); !slices.Equal(got, before) {
			t.Errorf("after resuming all: %v, want %v", got, before)
		}
	})
}

// TestWatchPauseSurvivesARestart: a pause is kept in the state file; a
// watch that starts while it runs keeps the link unshaped until its end,
// and resumes then. A pause that ended while watch was down, or that
// begins after the clock's time (the clock was set back), is dropped.
func TestWatchPauseSurvivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, map[string]string{"home": autorateLink}, nil, factsOn("en0", homeMAC))
		ctx := context.Background()
		if _, err := r.d.SetPause(ctx, statusapi.PauseChange{Link: "home", For: 10 * time.Minute, By: "alice"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r.stop()
		saved, err := state.Load(r.stateDir)
		if err != nil || saved.Pauses["home"].By != "alice" {
			t.Fatalf("the state file after stop: %+v %v", saved.Pauses, err)
		}
		time.Sleep(3 * time.Minute)
		r.start(factsOn("en0", homeMAC))
		if got := r.pipes(); len(got) != 0 {
			t.Fatalf("a restarted watch shaped a paused link: %v\n%s", got, r.log)
		}
		if st := r.d.Status(); len(st.Pauses) != 1 || st.Pauses[0].RemainingSeconds != 7*60 || st.Links[0].PausedUntil.IsZero() {
			t.Errorf("status after the restart: %+v", st.Pauses)
		}
		if !strings.Contains(r.log.String(), "shaping stays paused, as it was before watch started") {
			t.Errorf("the log does not say the pause holds on:\n%s", r.log)
		}
		time.Sleep(7*time.Minute + time.Second)
		synctest.Wait()
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) {
			t.Fatalf("after the kept pause ran out: %v", got)
		}

		// While watch is down, the pause ends; and one from a clock that
		// was ahead.
		r.stop()
		now := time.Now()
		if err := r.d.cfg.Tokens.Update(func(st *state.State) {
			st.Pauses = map[string]state.Pause{
				"home":         {Since: now.Add(-time.Hour), Until: now.Add(-time.Minute)},
				state.AllLinks: {Since: now.Add(time.Hour), Until: now.Add(90 * time.Minute)},
			}
		}); err != nil {
			t.Fatal(err)
		}
		r.start(factsOn("en0", homeMAC))
		if got := r.pipes(); !slices.Equal(got, []int{48001, 48002}) || len(r.d.Status().Pauses) != 0 {
			t.Errorf("pauses that ended or begin later kept the link paused: %v %+v", got, r.d.Status().Pauses)
		}
		if !strings.Contains(r.log.String(), "dropping a pause that begins after the clock's time") {
			t.Errorf("the log does not say why the pause was dropped:\n%s", r.log)
		}
		if saved, _ := state.Load(r.stateDir); saved.Pauses != nil {
			t.Errorf("the dropped pauses stay in the state file: %+v", saved.Pauses)
		}
	})
}

// TestWatchKeepsItsPaceUnderAFloodOfPauses: a flood of pause and resume
// requests (on a machine where each reconcile takes time) is refused
// beyond PauseBurst at once and one per PauseRefill, with an answer that
// says so and one log line, and the other link's controller keeps its
// pace: it ticks once a second and reads its counters every 200 ms
// throughout, while it is busy changing its rate.
func TestWatchKeepsItsPaceUnderAFloodOfPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, twoLinks, nil, twoInterfaces())
		ctx := context.Background()
		// home saturates a bloated 50 Mbit/s bottleneck: its controller
		// cuts and raises the rate all the time, each change one pipe
		// update through the loop.
		r.bloat(150*time.Millisecond, 50_000_000)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		// A slow machine: everything but a rate change takes 50 ms, so
		// each pause or resume costs the loop several tenths of a second.
		r.slowOther.Store(int64(50 * time.Millisecond))
		home := func() (ticks, loads uint64) {
			c := r.d.ctls.runners["home"].loop.State().Counters
			return c.Ticks, c.LoadSamples
		}
		ticks0, loads0 := home()
		decisions0 := r.d.ctls.runners["home"].loop.State().Counters.Decisions

		const window = 20 * time.Second
		var accepted, refused, other atomic.Int32
		var over atomic.Bool
		var wg sync.WaitGroup
		for g := range 20 {
			wg.Go(func() {
				for i := 0; ; i++ {
					c := statusapi.PauseChange{Link: "tether", By: "flood"}
					if (g+i)%2 == 0 {
						c.For = time.Minute
					}
					_, err := r.d.SetPause(ctx, c)
					switch {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, ErrTooManyPauses) && strings.Contains(err.Error(), "try again in"):
						refused.Add(1)
					default:
						other.Add(1)
					}
					time.Sleep(50 * time.Millisecond)
					if over.Load() {
						return
					}
				}
			})
		}
		time.Sleep(window)
		over.Store(true)
		wg.Wait()
		ticks1, loads1 := home()
		decisions1 := r.d.ctls.runners["home"].loop.State().Counters.Decisions
		t.Logf("over %v: %d accepted, %d refused, %d other; home ticked %d times, read its counters %d times, changed its rate %d times",
			window, accepted.Load(), refused.Load(), other.Load(), ticks1-ticks0, loads1-loads0, decisions1-decisions0)
		if max := int32(PauseBurst + window/PauseRefill + 1); accepted.Load() > max || refused.Load() == 0 || other.Load() != 0 {
			t.Errorf("%d requests accepted (at most %d), %d refused, %d failed otherwise", accepted.Load(), max, refused.Load(), other.Load())
		}
		if decisions1-decisions0 < 10 {
			t.Errorf("home changed its rate %d times: the test needs a busy controller", decisions1-decisions0)
		}
		if got := ticks1 - ticks0; got < uint64(window/time.Second)-1 {
			t.Errorf("home's controller ticked %d times in %v: it lost its pace", got, window)
		}
		if got := loads1 - loads0; got < uint64(window/(200*time.Millisecond))*9/10 {
			t.Errorf("home's controller read its counters %d times in %v: it lost its pace", got, window)
		}
		if n := strings.Count(r.log.String(), "refusing pause and resume requests: too many at once"); n != 1 {
			t.Errorf("the refusals were logged %d times in %v, want once a minute", n, window)
		}
	})
}
