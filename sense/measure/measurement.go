// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/shape"
)

// Measurement is one measurement of a link (`macake measure`, `init
// --measure`): the load test of Target against Server, with the
// target's reflectors probed throughout, and on macOS, against the
// public endpoint, Apple's networkQuality as a cross-check.
type Measurement struct {
	Target Target
	// Server is the URL of a speed-test server started with `macake
	// measure --serve`; "" for the public endpoint (ChooseEndpoint).
	Server string
	// Streams, Idle and Duration are the load test's (LoadTest).
	Streams        int
	Idle, Duration time.Duration
	// NoNetworkQuality skips the cross-check.
	NoNetworkQuality bool
	// Progress receives human progress lines (stderr), drawn in place
	// when TTY; nil for none.
	Progress io.Writer
	TTY      bool
}

// Run measures; it saves nothing. A failed or stalled phase is an error.
func (m Measurement) Run(ctx context.Context) (*Report, error) {
	t := m.Target
	endpoint, latencyTargets, err := ChooseEndpoint(ctx, m.Server, t.Probes())
	if err != nil {
		return nil, err
	}
	lt := LoadTest{
		Endpoint: endpoint, Streams: m.Streams, Idle: m.Idle, Duration: m.Duration,
		Targets: latencyTargets, Compare: t.Alternatives(), Gateway: t.Facts.GatewayIP, ProbeInterval: t.ProbeInterval,
		Interface: t.BoundInterface(),
		Progress:  m.Progress, TTY: m.TTY, Command: "measure",
	}
	res, err := lt.Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("%v; nothing saved", err)
	}
	rep := NewReport(t, endpoint, lt, res)
	if runtime.GOOS == "darwin" && m.Server == "" && !m.NoNetworkQuality {
		progress := m.Progress
		if progress == nil {
			progress = io.Discard
		}
		fmt.Fprintln(progress, "measure: cross-checking with networkQuality (about 20 s; --no-networkquality skips it)")
		if nq, err := RunNetworkQuality(ctx, t.Interface); err == nil {
			rep.NetworkQuality = nq
		} else if !errors.Is(err, ErrNoNetworkQuality) {
			fmt.Fprintf(progress, "note: networkQuality cross-check failed: %v\n", err)
		}
	}
	return rep, nil
}

// BenchTargets chooses `macake bench`'s endpoint (ChooseEndpoint) and
// what its latency is measured to: the public endpoint's own address,
// which macake does not exempt from shaping (unlike the controller's
// reflectors), so the result includes every delay the shaper adds; a
// server's own address (ChooseEndpoint); and the extra reflectors
// (--reflector) not among them yet.
func BenchTargets(ctx context.Context, server string, extra []config.Reflector) (speedtest.Endpoint, []shape.Reflector, error) {
	ep, targets, err := ChooseEndpoint(ctx, server, nil)
	if err != nil {
		return ep, nil, err
	}
	if server == "" {
		if host, err := ResolveHost(ctx, ep.Host()); err == nil {
			targets = append(targets, shape.ICMPReflector(host))
		}
	}
	for _, r := range extra {
		if !slices.Contains(shape.ReflectorAddrs(targets), r.Addr) {
			targets = append(targets, r.Resolve(shape.ProbeICMP))
		}
	}
	if len(targets) == 0 {
		return ep, nil, fmt.Errorf("cannot resolve %s for latency; pass --reflector ADDR", ep.Host())
	}
	return ep, targets, nil
}
