// SPDX-License-Identifier: Apache-2.0

package debounce

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestBursts: a burst becomes one signal, quiet after its last event,
// and a burst that never pauses still signals at the ceiling.
func TestBursts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := make(chan struct{})
		out := Bursts(t.Context(), in, 300*time.Millisecond, 2*time.Second)
		start := time.Now()
		var got []time.Duration
		var mu sync.Mutex
		go func() {
			for range out {
				mu.Lock()
				got = append(got, time.Since(start))
				mu.Unlock()
			}
		}()
		// A burst of 5 events 100 ms apart: one signal 300 ms after the last.
		for range 5 {
			in <- struct{}{}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Second)
		// Events every 150 ms for 5 s: the ceiling fires every 2 s.
		burst := time.Now()
		for time.Since(burst) < 5*time.Second {
			in <- struct{}{}
			time.Sleep(150 * time.Millisecond)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := []time.Duration{700 * time.Millisecond, 3500 * time.Millisecond, 5600 * time.Millisecond, 6750 * time.Millisecond}
		if len(got) != len(want) {
			t.Fatalf("signals at %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("signals at %v, want %v", got, want)
			}
		}
	})
}
