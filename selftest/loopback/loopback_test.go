// SPDX-License-Identifier: Apache-2.0

package loopback

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func millis(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func rtts(vals ...float64) []time.Duration {
	out := make([]time.Duration, len(vals))
	for i, v := range vals {
		out[i] = millis(v)
	}
	return out
}

// TestJudgeOnRecordedNumbers holds measurements against the pipe the lo0
// check configures (20 Mbit/s, 256 KB: Q/R = 104.9 ms).
func TestJudgeOnRecordedNumbers(t *testing.T) {
	pipe := Expectation{RateBits: 20_000_000, QueueBytes: 256 << 10}
	if got := pipe.FullQueueDelay().Round(100 * time.Microsecond); got != millis(104.9) {
		t.Fatalf("Q/R = %v", got)
	}
	for _, tt := range []struct {
		name     string
		m        Measurement
		problems []string
	}{
		{"shaped as modelled: 97 % of the rate, 80 % of Q/R",
			Measurement{IdleRTT: rtts(1.1, 0.9, 1.0), LoadedRTT: rtts(70, 85, 86, 90, 101), Bytes: 7_275_000, Window: 3 * time.Second}, nil},
		{"not shaped at all: loopback's own speed, no queue",
			Measurement{IdleRTT: rtts(0.05, 0.04), LoadedRTT: rtts(0.2, 0.3, 0.2), Bytes: 3_000_000_000, Window: 3 * time.Second},
			[]string{"the rate is", "the queueing delay is 0 %"}},
		{"shaped, but the queue unbounded: the delay keeps growing",
			Measurement{IdleRTT: rtts(1), LoadedRTT: rtts(300, 900, 1500), Bytes: 7_400_000, Window: 3 * time.Second},
			[]string{"the queueing delay is 857 %"}},
		{"half the rate: a pipe counting bytes twice",
			Measurement{IdleRTT: rtts(1), LoadedRTT: rtts(200, 210, 190), Bytes: 3_750_000, Window: 3 * time.Second},
			[]string{"the rate is 50 %", "the queueing delay is 190 %"}},
	} {
		v, err := Judge(tt.m, pipe)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(v.Problems) != len(tt.problems) {
			t.Errorf("%s: problems %q, want %d (%s)", tt.name, v.Problems, len(tt.problems), v.Measured())
			continue
		}
		for i, want := range tt.problems {
			if !strings.Contains(v.Problems[i], want) {
				t.Errorf("%s: problem %q lacks %q", tt.name, v.Problems[i], want)
			}
		}
	}
	if _, err := Judge(Measurement{}, pipe); err != ErrNoSamples {
		t.Errorf("an empty measurement: %v", err)
	}
	v, _ := Judge(Measurement{IdleRTT: rtts(1.1, 0.9), LoadedRTT: rtts(85, 87), Bytes: 7_275_000, Window: 3 * time.Second}, pipe)
	if got, want := v.Measured()+" / "+v.Model(), "19.4 Mbit/s, queueing delay +85.0 ms (idle RTT 1.0 ms) / 20.0 Mbit/s, +104.9 ms (a full 256 KB queue)"; got != want {
		t.Errorf("summaries %q, want %q", got, want)
	}
}

// serveLoopback starts a server on a loopback port, closed when the
// test ends, and returns it with a dialler of it.
func serveLoopback(t *testing.T) (*Server, func(context.Context) (net.Conn, error)) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Serve(ln)
	t.Cleanup(func() { srv.Close() })
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp4", srv.Addr().String())
	}
	return srv, dial
}

// TestMeasureUnshapedLoopback runs the real measurement over an unshaped
// loopback: it completes, and Judge says this is no 20 Mbit/s pipe.
func TestMeasureUnshapedLoopback(t *testing.T) {
	srv, dial := serveLoopback(t)
	if err := Send(context.Background(), dial, 4096); err != nil {
		t.Fatal(err)
	}
	m, err := Measure(context.Background(), srv, dial, Config{Duration: 600 * time.Millisecond, Warmup: 100 * time.Millisecond, PingInterval: 20 * time.Millisecond, IdlePings: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.IdleRTT) != 3 || len(m.LoadedRTT) == 0 || m.Bytes == 0 || m.Window <= 0 {
		t.Fatalf("measurement: %+v", m)
	}
	v, err := Judge(m, Expectation{RateBits: 20_000_000, QueueBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Problems) == 0 {
		t.Errorf("unshaped loopback judged as a 20 Mbit/s pipe: %s", v.Measured())
	}
	if srv.Received() < 4096 {
		t.Errorf("the server counted %d bytes", srv.Received())
	}
}

// TestMeasureStopsWithItsContext: an interrupted measurement returns at
// once with the context's error.
func TestMeasureStopsWithItsContext(t *testing.T) {
	srv, dial := serveLoopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	if _, err := Measure(ctx, srv, dial, Config{Duration: time.Minute}); err == nil {
		t.Fatal("no error after cancel")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v to stop", took)
	}
}
