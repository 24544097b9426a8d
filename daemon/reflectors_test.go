// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
