// SPDX-License-Identifier: Apache-2.0

package tccheck

import (
	"context"
	"net"
	"net/netip"

	"github.com/macake/macake/internal/nsenter"
	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/selftest/loopback"
)

// probeShaping measures the upload shaper the way the pf suite measures
// a pipe on lo0: the server listens in the peer namespace, the client
// dials from the link's side, so the bulk stream and the pings leave
// through linkDev's shaper; every socket uses CUBIC. CAKE is not a
// drop-tail queue (its AQM keeps the delay near its 5 ms target), so
// there the check is skipped rather than held to Q/R.
func (s *Suite) probeShaping(ctx context.Context) check.Result {
	if s.b.Capabilities(ctx).ShapesWithCake() {
		return check.Result{Status: check.Skipped, Detail: "this kernel shapes with cake, whose AQM keeps the queue near its target instead of filling it: the Q/R model is a drop-tail queue's (htb+bfifo); make e2e measures cake"}
	}
	var ln net.Listener
	err := nsenter.Do(s.peer, func() (err error) {
		ln, err = (&net.ListenConfig{Control: nsenter.Cubic}).Listen(ctx, "tcp4", netip.AddrPortFrom(netip.MustParseAddr(farAddr), 0).String())
		return err
	})
	if err != nil {
		return errorResult(err)
	}
	srv := loopback.Serve(ln)
	defer srv.Close()
	dial := func(ctx context.Context) (net.Conn, error) {
		var c net.Conn
		err := nsenter.Do(s.ns, func() (err error) {
			c, err = (&net.Dialer{Control: nsenter.Cubic}).DialContext(ctx, "tcp4", srv.Addr().String())
			return err
		})
		return c, err
	}
	measure := func(ctx context.Context) (loopback.Measurement, error) {
		return loopback.Measure(ctx, srv, dial, s.opts.Measure)
	}
	up := s.desired.Links[0].Upload
	r := check.Measured(ctx, measure, loopback.Expectation{RateBits: up.RateBits, QueueBytes: up.QueueBytes})
	if s.offloads != "" && (r.Status == check.Differs || r.Status == check.Inconclusive) {
		r.Detail += " (" + s.offloads + ")"
	}
	return r
}
