// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/netns"
	"github.com/macake/macake/shape"
)

// OracleShaper is the client's shaper run by a controller that knows the
// true capacity: macake's own tc shaping (the tc backend, in-process,
// rate changes over netlink),
// with each direction set to OracleShare of the trace's capacity a lag
// after every change, and a queue of OracleQueue at that rate. It is the
// kernel's upper bound of what rate knowledge buys, the twin of the
// simulator's oracle arm.
type OracleShaper struct {
	// NS is the client namespace, Trace the schedule it follows and Lag
	// how late it follows it.
	NS    *netns.Namespace
	Trace Trace
	Lag   time.Duration

	b    *tc.Backend
	link shape.Link
}

// oracleLink is the shaped link at step s: both directions at
// OracleShare × its capacity.
func (o *OracleShaper) oracleLink(s Step) shape.Link {
	pipe := func(c int64) shape.Pipe {
		r := max(int64(float64(c)*OracleShare)/1000*1000, 1000)
		return shape.Pipe{RateBits: r, QueueBytes: OracleQueueBytes(r)}
	}
	var refl []shape.Reflector
	for _, r := range Reflectors {
		refl = append(refl, shape.ICMPReflector(netip.MustParseAddr(r)))
	}
	return shape.Link{Name: "oracle", Interface: ClientDev, Upload: pipe(s.Upload), Download: pipe(s.Download), Reflectors: refl}
}

// Start installs the shaping at the trace's first step.
func (o *OracleShaper) Start(ctx context.Context) error {
	o.b = tc.New(execrun.Exec{Timeout: 10 * time.Second})
	o.b.Tools.Netns = o.NS.Name()
	// Rate changes over netlink, as watch makes them: a tc process per
	// change takes about 50 ms in a cakevm guest, and a trace of 100 ms
	// steps changes both directions at each, so the oracle would fall ever
	// further behind the capacity it knows.
	o.b.Netlink = tc.NewNetlink(o.NS.Name())
	o.link = o.oracleLink(o.Trace.At(0))
	p, err := o.b.Plan(ctx, shape.State{Links: []shape.Link{o.link}})
	if err != nil {
		return fmt.Errorf("oracle: %w", err)
	}
	for _, op := range p.Ops {
		if err := o.b.Execute(ctx, op); err != nil {
			return fmt.Errorf("oracle: %w", err)
		}
	}
	return nil
}

// Follow sets the rates along the trace, Lag after each step from start,
// until the trace or ctx ends.
func (o *OracleShaper) Follow(ctx context.Context, start time.Time) error {
	for _, s := range o.Trace.Steps {
		if d := time.Until(start.Add(s.At + o.Lag)); d > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(d):
			}
		}
		next := o.oracleLink(s)
		for _, d := range shape.Directions {
			if next.Pipe(d) == o.link.Pipe(d) {
				continue
			}
			if err := o.b.SetRate(ctx, o.link, d, next.Pipe(d)); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("oracle: %w", err)
			}
			o.link = o.link.WithPipe(d, next.Pipe(d))
		}
	}
	return nil
}

// Stop removes the shaping.
func (o *OracleShaper) Stop(ctx context.Context) (*ProcessCost, error) {
	if o.b == nil {
		return nil, errors.New("oracle: not started")
	}
	_, err := o.b.Teardown(ctx)
	return nil, errors.Join(err, o.b.Netlink.Close())
}
