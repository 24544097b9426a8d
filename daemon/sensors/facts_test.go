// SPDX-License-Identifier: Apache-2.0

package sensors

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/sense/linkfacts"
)

// gatewayOn is the facts of en0, up behind the gateway at ip.
func gatewayOn(ip string) linkfacts.Facts {
	return linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true, GatewayIP: netip.MustParseAddr(ip), Default: true}}}
}

// scriptedFacts returns the facts (or errors) of a script, one per call.
type scriptedFacts struct {
	mu    sync.Mutex
	steps []func() (linkfacts.Facts, error)
}

func (s *scriptedFacts) Facts(context.Context) (linkfacts.Facts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	step := s.steps[0]
	if len(s.steps) > 1 {
		s.steps = s.steps[1:]
	}
	return step()
}

// TestLinkFactsWatch: the daemon's facts watcher (linkfacts.Watch through
// the LinkFacts adapter) reports the first read as the start event, and a
// change, an error and the recovery as one event each; unchanged reads
// make none. linkfacts' own tests cover debouncing and sleep detection.
func TestLinkFactsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		home, hotel := gatewayOn("192.168.1.1"), gatewayOn("10.0.0.1")
		ok := func(f linkfacts.Facts) func() (linkfacts.Facts, error) {
			return func() (linkfacts.Facts, error) { return f, nil }
		}
		src := &scriptedFacts{steps: []func() (linkfacts.Facts, error){
			ok(home), ok(home), ok(hotel), ok(hotel),
			func() (linkfacts.Facts, error) { return linkfacts.Facts{}, errors.New("facts file is gone") },
			ok(hotel),
		}}
		ch := LinkFacts{Source: src, Config: linkfacts.WatchConfig{Poll: time.Second}}.Watch(t.Context())
		var got []string
		for range 4 {
			var ev FactsEvent
			select {
			case ev = <-ch:
			case <-time.After(time.Minute):
				t.Fatalf("events so far %q; no more", got)
			}
			s := ev.Reason
			if ev.Err != nil {
				s += ": " + ev.Err.Error()
			}
			got = append(got, s)
		}
		want := []string{"start", "poll", "error: facts file is gone", "poll"}
		if !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		time.Sleep(3 * time.Second)
		select {
		case ev := <-ch:
			t.Fatalf("an event without a change: %+v", ev)
		default:
		}
	})
}
