// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/state"
)

// reflectorAddr is the ith of mostlyDeadLink's reflectors (1 to 30).
func reflectorAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 9, 0, byte(i)}) }

// mostlyDeadLink is a policy with 30 reflectors, and the set of them that
// do not answer: all but those the test names (a hotel or corporate
// network that blocks public resolvers).
func mostlyDeadLink(alive ...int) (policy string, dead map[netip.Addr]bool) {
	var list []string
	dead = map[netip.Addr]bool{}
	for i := 1; i <= 30; i++ {
		list = append(list, `"`+reflectorAddr(i).String()+`"`)
		dead[reflectorAddr(i)] = true
	}
	for _, i := range alive {
		delete(dead, reflectorAddr(i))
	}
	policy = strings.Replace(autorateLink, `reflectors = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"]`,
		"reflectors = ["+strings.Join(list, ", ")+"]", 1)
	return policy, dead
}

var idleRTTLine = regexp.MustCompile(`measured the idle RTT.* idle_rtt=(\S+)`)

// TestWatchIdleRTTWithMostlyDeadReflectors: with all but one of 30
// reflectors silent, and that one going silent too while another starts
// to answer, the idle RTT watch learns (and writes into the state file)
// is the path's 0.1 ms, never the 200 ms that a reflector which has not
// answered yet starts from; status shows the same.
func TestWatchIdleRTTWithMostlyDeadReflectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy, dead := mostlyDeadLink(7)
		r := newRigOn(t, map[string]string{"home": policy}, nil, factsOn("en0", homeMAC), func(n *fakeNet) {
			n.rtt, n.dead, n.busy = 100*time.Microsecond, dead, true
		})
		// Under traffic the controller finds the one that answers.
		time.Sleep(time.Minute)
		// It stops answering; the controller replaces it with one that
		// never answered, and some while later another one answers.
		r.net.set(func(n *fakeNet) { n.dead[reflectorAddr(7)] = true })
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if c := r.d.Status().Links[0].Controller; c.IdleRTTSeconds > 0.001 {
			t.Errorf("status shows an idle RTT of %v s on a 0.1 ms path", c.IdleRTTSeconds)
		}
		r.net.set(func(n *fakeNet) { delete(n.dead, reflectorAddr(23)) })
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if os.Getenv("WATCH_LOG") != "" {
			t.Log(r.log)
		}
		learned := idleRTTLine.FindAllStringSubmatch(r.log.String(), -1)
		if len(learned) == 0 {
			t.Fatalf("no idle RTT learned in 5 minutes:\n%s", r.log)
		}
		for _, m := range learned {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				t.Fatalf("idle_rtt=%q: %v", m[1], err)
			}
			if d > time.Millisecond {
				t.Errorf("learned an idle RTT of %v on a 0.1 ms path", d)
			}
		}
		saved, err := state.Load(r.stateDir)
		if err != nil {
			t.Fatal(err)
		}
		if got := saved.Profiles[state.ProfileKey("home", homeMAC)].IdleRTT; got <= 0 || got > time.Millisecond {
			t.Errorf("idle RTT in the state file after stop: %v, want 0.1 ms", got)
		}
	})
}

// logLines returns the log's lines at level (e.g. "INFO") that contain
// every one of words.
func logLines(log, level string, words ...string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "level="+level+" ") {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// exemptedReflectors returns the reflectors the anchor's rules exempt.
func (r *rig) exemptedReflectors() []string {
	var out []string
	for _, rule := range r.anchorRules() {
		if f := strings.Fields(rule); strings.HasPrefix(rule, "no dummynet") && f[len(f)-2] == "to" && f[len(f)-1] != "any" {
			out = append(out, f[len(f)-1])
		}
	}
	return out
}

// TestWatchReflectorChurnIsQuiet: watch starts with the reflectors a plan
// shows exempt (the policy's first six, randomize_reflectors or not) and
// keeps them across an edit; with 24 of 30 silent, each replacement is one
// line in the log (the exemption change it causes goes to Debug), and the
// status page's event list holds no `change applied` for it.
func TestWatchReflectorChurnIsQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy, dead := mostlyDeadLink(5, 10, 15, 20, 25, 30)
		r := newRigOn(t, map[string]string{"home": policy}, nil, factsOn("en0", homeMAC), func(n *fakeNet) {
			n.rtt, n.dead, n.busy = 100*time.Microsecond, dead, true
		})
		var first []string
		for i := 1; i <= 6; i++ {
			first = append(first, reflectorAddr(i).String())
		}
		if got := r.exemptedReflectors(); !slices.Equal(got, first) {
			t.Errorf("watch started exempting %v; a plan shows the policy's first six %v", got, first)
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		log := r.log.String()
		replaced := logLines(log, "INFO", "reflector replaced")
		if len(replaced) == 0 {
			t.Fatalf("no reflector replaced in 5 minutes with 24 of 30 silent:\n%s", log)
		}
		if noisy := logLines(log, "INFO", "trigger=reflectors"); len(noisy) > 0 {
			t.Errorf("%d replacements, and %d reconciles logged at INFO for them:\n%s", len(replaced), len(noisy), strings.Join(noisy, "\n"))
		}
		if noisy := logLines(log, "INFO", "change applied", "kind=rules", "action=update"); len(noisy) > 0 {
			t.Errorf("%d replacements, and %d rule changes logged at INFO for them:\n%s", len(replaced), len(noisy), strings.Join(noisy, "\n"))
		}
		for _, e := range r.d.Query(context.Background(), statusapi.Query{Events: true}).Events {
			if e.Message == "change applied" && e.Attrs["kind"] == "rules" && e.Attrs["action"] == "update" {
				t.Errorf("the event list shows %s", e.Summary)
			}
		}
		// An edit of another key restarts the controller; it keeps
		// probing, and exempting, the reflectors it found.
		before := r.exemptedReflectors()
		r.write("home", strings.Replace(policy, `download = "80mbit"`, `download = "70mbit"`, 1))
		r.edited()
		time.Sleep(time.Second)
		synctest.Wait()
		if after := r.exemptedReflectors(); !slices.Equal(after, before) {
			t.Errorf("an edit of the rate changed the exemptions from %v to %v", before, after)
		}
		if os.Getenv("WATCH_LOG") != "" {
			t.Log(log)
		}
	})
}

// TestWatchAllReflectorsDead: with every reflector silent under traffic,
// watch says so once, and the controller tries the pool once and then
// ever more slowly, so the exemptions (which follow what is probed) are
// rewritten through the first half-minute and a few times after, not every
// second for as long as it lasts.
func TestWatchAllReflectorsDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy, dead := mostlyDeadLink()
		r := newRigOn(t, map[string]string{"home": policy}, nil, factsOn("en0", homeMAC), func(n *fakeNet) {
			n.rtt, n.dead, n.busy = 100*time.Microsecond, dead, true
		})
		r.emu.ResetCalls()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		log := r.log.String()
		if said := logLines(log, "WARN", "no reflector answers"); len(said) != 1 {
			t.Errorf("said %d times that no reflector answers, want once:\n%s", len(said), log)
		}
		swaps := r.d.ctls.runners["home"].loop.State().Counters.Replacements
		if swaps > 45 {
			t.Errorf("%d replacements in 10 minutes with every reflector silent, want them spaced out", swaps)
		}
		if calls := r.mutating(); len(calls) > 45 {
			t.Errorf("changed the system %d times in 10 minutes while nothing answered: %v", len(calls), calls)
		}
		if lines := logLines(log, "INFO"); len(lines) > 20 {
			t.Errorf("%d INFO lines in 10 minutes of silence:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		// The network comes back: said once.
		r.net.set(func(n *fakeNet) { clear(n.dead) })
		time.Sleep(time.Minute)
		synctest.Wait()
		if said := logLines(r.log.String(), "INFO", "a reflector answers again"); len(said) != 1 {
			t.Errorf("said %d times that a reflector answers again, want once", len(said))
		}
		if os.Getenv("WATCH_LOG") != "" {
			t.Log(r.log)
		}
	})
}

// TestWatchStallsAreDebounced: with one reflector answering now and then
// on an idle link, the controller stalls and resumes every few hundred
// milliseconds; the log says nothing of stalls that short.
func TestWatchStallsAreDebounced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy, dead := mostlyDeadLink(3)
		r := newRigOn(t, map[string]string{"home": policy}, nil, factsOn("en0", homeMAC), func(n *fakeNet) {
			n.rtt, n.dead, n.busy, n.phase = 100*time.Microsecond, dead, true, 30*time.Millisecond
		})
		time.Sleep(time.Minute)
		r.net.set(func(n *fakeNet) { n.busy = false })
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		log := r.log.String()
		if n := len(logLines(log, "DEBUG", "after a short stall")); n < 10 {
			t.Fatalf("%d short stalls; the test wants the controller flapping:\n%s", n, log)
		}
		if stalls := logLines(log, "WARN", "controller stalled"); len(stalls) > 2 {
			t.Errorf("%d stalls logged:\n%s", len(stalls), strings.Join(stalls, "\n"))
		}
	})
}
