// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
)

// progressLine writes progress to stderr: one updating line on a terminal,
// otherwise a line at most every 5 s, so that a log is not flooded.
type progressLine struct {
	w     io.Writer
	tty   bool
	cmd   string
	last  time.Time
	dirty bool
}

func (p *progressLine) line(s string) {
	if p.w == nil {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s: %s", p.cmd, s)
		p.dirty = true
		return
	}
	if time.Since(p.last) >= 5*time.Second {
		fmt.Fprintf(p.w, "%s: %s\n", p.cmd, s)
		p.last = time.Now()
	}
}

func (p *progressLine) done() {
	if p.w != nil && p.tty && p.dirty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// wait sleeps d, reporting progress every 250 ms.
func (p *progressLine) wait(ctx context.Context, phase string, d time.Duration, detail func() string) error {
	end := time.Now().Add(d)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case <-t.C:
			p.line(fmt.Sprintf("%s %d/%ds  rtt %s", phase, int((d - time.Until(end)).Seconds()), int(d.Seconds()), detail()))
		}
	}
	return nil
}

// rtt is the median RTT over the last second, across targets.
func (p *progressLine) rtt(rec *probe.Recorder, targets []netip.Addr) string {
	now := time.Now()
	var all []time.Duration
	for _, t := range targets {
		if s := rec.Window(t, now.Add(-1500*time.Millisecond), now); s.Samples > 0 {
			all = append(all, s.P50)
		}
	}
	if len(all) == 0 {
		return "-"
	}
	return shape.FormatLatency(probe.Percentile(all, 50))
}
