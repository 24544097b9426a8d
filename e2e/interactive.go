// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"slices"
	"time"

	"github.com/macake/macake/score"
	"github.com/macake/macake/sim"
)

// The user's interactive traffic on the testbed, through the shaper like
// any of their traffic (neither is exempt, unlike the controller's
// probes): the ping, whose round trips the score is taken from, and a
// call, whose one-way delays say what a person on a video or voice call
// beside the download would feel.
const (
	// PingInterval is the ping's period: 10 a second, as `ping -i 0.1`.
	PingInterval = 100 * time.Millisecond
	// PingPayload is the ping's UDP payload: 56 bytes, so its packets are
	// 84 bytes of IP, as ping's ICMP echoes are.
	PingPayload = 56
	// CallInterval is the call's packet period each way (50 a second,
	// 20 ms of audio each); its packets are sim.CallBytes of IP.
	CallInterval = sim.DefaultCallInterval
)

// callLeg is one direction of the call: when each packet was sent, in
// sequence order, and its one-way delay (0: not arrived).
type callLeg struct {
	sent []time.Time
	owd  []time.Duration
}

// window returns the one-way delays (ms) of the packets sent in [from, to)
// that arrived, in sequence order, and how many did not.
func (l *callLeg) window(from, to time.Time) (owd []float64, lost int) {
	arrived, lost := arrivedIn(l.sent, l.owd, from, to)
	for _, d := range arrived {
		owd = append(owd, score.Ms(d))
	}
	return owd, lost
}

// arrivedIn returns, of the packets sent at sent (in sequence order) with
// the delays delay (0: never arrived), the delays of those sent in
// [from, to) that arrived, and how many of those did not: a call leg's
// one-way delays, a probe's round trips.
func arrivedIn(sent []time.Time, delay []time.Duration, from, to time.Time) (arrived []time.Duration, lost int) {
	for i, at := range sent {
		if at.Before(from) || !at.Before(to) {
			continue
		}
		if delay[i] == 0 {
			lost++
			continue
		}
		arrived = append(arrived, delay[i])
	}
	return arrived, lost
}

// flow is what the leg's packets sent in [loadFrom, loadTo) felt: loss,
// one-way delay added to the idle window's median (percentiles over every
// packet sent, a lost one counting as lostDelay) and jitter.
func (l *callLeg) flow(idleFrom, idleTo, loadFrom, loadTo time.Time, lostDelay time.Duration) score.Flow {
	idle, _ := l.window(idleFrom, idleTo)
	base := 0.0
	if len(idle) > 0 {
		base = score.Percentile(slices.Sorted(slices.Values(idle)), 50)
	}
	owd, lost := l.window(loadFrom, loadTo)
	d := score.Delays{Lost: lost}
	for _, v := range owd {
		d.Delivered = append(d.Delivered, v-base)
	}
	return score.FlowOf(d, score.LostOrDefault(lostDelay))
}
