// SPDX-License-Identifier: Apache-2.0

package loopback

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/macake/macake/internal/netns"
)

// TestMeasureThroughAKernelShaper runs the measurement through a real
// drop-tail shaper (htb at 20 Mbit/s with a 256 KB bfifo, the pipe the lo0
// check configures on a Mac) between two network namespaces, with CUBIC:
// Judge must find it shaped as modelled. This is the Linux stand-in for
// the Mac's lo0 check; the arithmetic is the same.
func TestMeasureThroughAKernelShaper(t *testing.T) {
	if testing.Short() {
		t.Skip("shapes real traffic for a few seconds; skipped with -short")
	}
	client, server := netns.New(t, "loopback").Pair()
	e := Expectation{RateBits: 20_000_000, QueueBytes: 256 << 10}
	client.Bottleneck(netns.ClientDev, e.RateBits, e.QueueBytes)
	ln, err := server.Listen(netns.CubicListenConfig(), "tcp4", netns.ServerIP4+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Serve(ln)
	defer srv.Close()
	dial := func(ctx context.Context) (net.Conn, error) {
		return client.Dial(ctx, netns.CubicDialer(), "tcp4", srv.Addr().String())
	}
	m, err := Measure(context.Background(), srv, dial, Config{Duration: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v, err := Judge(m, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured %s; model %s (rate %.2f, delay %.2f of the model)", v.Measured(), v.Model(), v.RateRatio, v.DelayRatio)
	for _, p := range v.Problems {
		t.Error(p)
	}
}
