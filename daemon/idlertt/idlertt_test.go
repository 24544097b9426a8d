// SPDX-License-Identifier: Apache-2.0

package idlertt

import (
	"testing"
	"time"
)

// TestReplyRTTs: the filter's figure is a low percentile of the least
// round trip of each 10 s, over ten minutes: a few minutes of replies
// that all carry a queue (a long download) do not move it, one odd bucket
// does not set it, and a figure older than the window is forgotten.
func TestReplyRTTs(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	f := New(start)
	if idle, n := f.Idle(start); idle != 0 || n != 0 {
		t.Fatalf("empty filter: %v after %d replies, want 0", idle, n)
	}
	// One minute idle at 10 ms (replies every 50 ms).
	for d := time.Duration(0); d < time.Minute; d += 50 * time.Millisecond {
		f.Add(at(d), 10*time.Millisecond+time.Duration(d%(7*time.Millisecond)))
	}
	if idle, n := f.Idle(at(time.Minute)); idle != 10*time.Millisecond || n != 1200 {
		t.Errorf("after an idle minute: %v after %d replies, want 10ms after 1200", idle, n)
	}
	// Four minutes of download: every reply 40 ms late.
	for d := time.Minute; d < 5*time.Minute; d += 50 * time.Millisecond {
		f.Add(at(d), 50*time.Millisecond)
	}
	if idle, _ := f.Idle(at(5 * time.Minute)); idle != 10*time.Millisecond {
		t.Errorf("after four minutes under load: %v, want the idle 10ms", idle)
	}
	// A single reply far below the rest (a bucket of its own) does not set
	// the figure once the window holds more than ten buckets.
	f.Add(at(5*time.Minute), 1*time.Millisecond)
	if idle, _ := f.Idle(at(5 * time.Minute)); idle != 10*time.Millisecond {
		t.Errorf("one odd reply moved the figure to %v", idle)
	}
	// Ten minutes on, nothing of the first minute is left.
	if idle, _ := f.Idle(at(11*time.Minute + 5*time.Second)); idle != 50*time.Millisecond {
		t.Errorf("eleven minutes on: %v, want 50ms (only the loaded buckets are in the window)", idle)
	}
	// A reply below the clock's resolution counts as the least measurable.
	g := New(start)
	g.Add(start, 0)
	if idle, _ := g.Idle(start); idle != Min {
		t.Errorf("a 0 round trip reads %v, want %v", idle, Min)
	}
}

// BenchmarkReplyRTTsAdd: a reply's cost in the filter (the runner adds
// one per reply, 20 a second per link).
func BenchmarkReplyRTTsAdd(b *testing.B) {
	start := time.Now()
	f := New(start)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Add(start.Add(time.Duration(i)*50*time.Millisecond), time.Millisecond)
	}
}
