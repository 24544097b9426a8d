// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// CC is a congestion-control algorithm of the simulated TCP senders.
type CC int

// The congestion controls. CUBIC is what macOS and Linux use by default and
// what builds the bufferbloat the benchmark measures; Reno is the classic
// AIMD for comparison.
const (
	Cubic CC = iota
	Reno
)

// String returns "cubic" or "reno".
func (c CC) String() string {
	if c == Reno {
		return "reno"
	}
	return "cubic"
}

// ParseCC reads "cubic" or "reno".
func ParseCC(s string) (CC, error) {
	switch strings.ToLower(s) {
	case "cubic":
		return Cubic, nil
	case "reno", "aimd", "newreno":
		return Reno, nil
	}
	return 0, fmt.Errorf("unknown congestion control %q; want cubic or reno", s)
}

const (
	initialCwnd   = 10
	minRTO        = 200 * time.Millisecond
	maxRTO        = 60 * time.Second
	delayedAckMax = 40 * time.Millisecond
	cubicC        = 0.4
	cubicBeta     = 0.7
)

// Segment states in the sender's scoreboard.
const (
	segInFlight uint8 = iota // sent, not yet known delivered or lost
	segDelivered
	segLost // marked lost, waiting for retransmission
)

type segment struct {
	sentAt int64
	state  uint8
}

type sendRecord struct {
	seq    int32
	sentAt int64
}

// sender is the sending side of one bulk TCP flow: an unlimited amount of
// data, a SACK scoreboard, RACK-style time-based loss detection (the Linux
// default), fast recovery with one window reduction per episode, RTO with
// exponential back-off, and Reno or CUBIC window growth.
type sender struct {
	cc       CC
	rwnd     int32 // receive window in segments
	sndUna   int32 // lowest segment not cumulatively acknowledged
	sndNxt   int32 // next new segment
	cwnd     float64
	ssthresh float64
	inflight int32 // segments believed in the network

	segs      ring[segment]    // scoreboard for [sndUna, sndNxt)
	sendOrder ring[sendRecord] // every transmission in time order
	lost      ring[int32]      // segments marked lost, to retransmit

	rackXmit   int64 // send time of the most recently delivered transmission
	srtt       float64
	rttvar     float64
	minRTT     int64
	rto        int64
	rtoAt      int64 // 0 = not armed
	inRecovery bool
	recoverSeq int32

	// CUBIC state
	wMax, k, origin, wEst float64
	epochStart            int64

	// HyStart (delay increase) state: slow start ends when the RTT of a
	// round has risen by clamp(minRTT/8, 4 ms, 16 ms), as Linux CUBIC does.
	roundEnd     int32
	roundSamples int
	roundMin     int64

	// Spurious-timeout detection (Eifel with timestamps, as Linux undoes a
	// timeout with F-RTO): when the first ack after a timeout echoes a
	// transmission older than the timeout, the original data got through
	// and the timeout was only a delay spike in a deep queue.
	rtoAt0                 int64 // time of the last timeout, 0 = none pending
	undoCwnd, undoSsthresh float64

	// Counters
	retransmits int64
	timeouts    int64
	delivered   int64 // segments delivered (cumulatively or selectively)
}

func newSender(cc CC, rwndBytes int) *sender {
	s := &sender{
		cc:       cc,
		rwnd:     int32(max(rwndBytes/mssBytes, 4)),
		cwnd:     initialCwnd,
		ssthresh: math.MaxInt32,
		rto:      int64(time.Second),
	}
	return s
}

// canSend reports whether the window allows one more transmission.
func (s *sender) canSend() bool {
	if float64(s.inflight) >= math.Floor(s.cwnd) {
		return false
	}
	if s.lost.len() > 0 {
		return true
	}
	return s.sndNxt-s.sndUna < s.rwnd
}

// next picks the segment to transmit now: a lost one first, else new data.
// ok is false when nothing may be sent.
func (s *sender) next(now int64) (seq int32, ok bool) {
	for s.canSend() {
		if s.lost.len() > 0 {
			seq := s.lost.pop()
			if seq < s.sndUna {
				continue
			}
			seg := s.segs.at(int(seq - s.sndUna))
			if seg.state != segLost {
				continue
			}
			seg.state, seg.sentAt = segInFlight, now
			s.inflight++
			s.retransmits++
			s.sendOrder.push(sendRecord{seq, now})
			if seq == s.sndUna {
				s.rtoAt = now + s.rto // Linux re-arms when it retransmits the head
			} else {
				s.armRTO(now)
			}
			return seq, true
		}
		if s.sndNxt-s.sndUna >= s.rwnd {
			return 0, false
		}
		seq := s.sndNxt
		s.sndNxt++
		s.segs.push(segment{sentAt: now, state: segInFlight})
		s.inflight++
		s.sendOrder.push(sendRecord{seq, now})
		s.armRTO(now)
		return seq, true
	}
	return 0, false
}

func (s *sender) armRTO(now int64) {
	if s.rtoAt == 0 {
		s.rtoAt = now + s.rto
	}
}

// onAck processes an acknowledgement: cumulative ack, one SACKed segment
// and the echoed transmission time.
func (s *sender) onAck(now int64, ack, sack int32, echo int64) {
	if echo > 0 {
		s.rttSample(now - echo)
		if echo > s.rackXmit {
			s.rackXmit = echo
		}
	}
	progressed := ack > s.sndUna
	if s.rtoAt0 != 0 && progressed {
		if echo > 0 && echo < s.rtoAt0 {
			s.undoTimeout()
		}
		s.rtoAt0 = 0
	}
	var newly int32
	for s.sndUna < ack && s.segs.len() > 0 {
		seg := s.segs.pop()
		if seg.state != segDelivered {
			if seg.state == segInFlight {
				s.inflight--
			}
			newly++
		}
		s.sndUna++
	}
	if sack >= s.sndUna && sack < s.sndNxt {
		seg := s.segs.at(int(sack - s.sndUna))
		if seg.state != segDelivered {
			if seg.state == segInFlight {
				s.inflight--
			}
			seg.state = segDelivered
			newly++
		}
	}
	s.delivered += int64(newly)

	// RACK: a transmission sent sufficiently before one that has been
	// delivered is lost.
	reo := s.minRTT / 4
	if reo < int64(time.Millisecond) {
		reo = int64(time.Millisecond)
	}
	markedLost := false
	for s.sendOrder.len() > 0 {
		r := s.sendOrder.front()
		if r.seq < s.sndUna {
			s.sendOrder.pop()
			continue
		}
		seg := s.segs.at(int(r.seq - s.sndUna))
		if seg.state != segInFlight || seg.sentAt != r.sentAt {
			s.sendOrder.pop()
			continue
		}
		if r.sentAt+reo >= s.rackXmit {
			break
		}
		seg.state = segLost
		s.inflight--
		s.lost.push(r.seq)
		s.sendOrder.pop()
		markedLost = true
	}

	if s.inRecovery && s.sndUna >= s.recoverSeq {
		s.inRecovery = false
	}
	if markedLost && !s.inRecovery {
		s.inRecovery = true
		s.recoverSeq = s.sndNxt
		s.onCongestion(now)
	}
	if !s.inRecovery && newly > 0 {
		s.grow(now, float64(newly))
	}
	if progressed {
		s.rtoAt = 0
		if s.sndNxt > s.sndUna {
			s.rtoAt = now + s.rto
		}
	}
}

func (s *sender) rttSample(rtt int64) {
	if rtt <= 0 {
		return
	}
	r := float64(rtt)
	if s.srtt == 0 {
		s.srtt, s.rttvar = r, r/2
	} else {
		s.rttvar = float64(0.75*s.rttvar) + float64(0.25*math.Abs(s.srtt-r))
		s.srtt = float64(0.875*s.srtt) + float64(0.125*r)
	}
	if s.minRTT == 0 || rtt < s.minRTT {
		s.minRTT = rtt
	}
	if s.cc == Cubic && s.cwnd < s.ssthresh && s.cwnd >= 16 {
		s.hystart(rtt)
	}
	// Linux floors the variance term at the minimum RTO, so a standing
	// queue (RTT steady, rttvar tiny) does not make every stall a timeout.
	rto := int64(s.srtt + math.Max(float64(4*s.rttvar), float64(minRTO)))
	s.rto = min(max(rto, int64(minRTO)), int64(maxRTO))
}

func (s *sender) hystart(rtt int64) {
	if s.sndUna >= s.roundEnd { // a new round
		s.roundEnd = s.sndNxt
		s.roundSamples = 0
		s.roundMin = math.MaxInt64
	}
	if s.roundSamples >= 8 {
		return
	}
	s.roundSamples++
	if rtt < s.roundMin {
		s.roundMin = rtt
	}
	if s.roundSamples == 8 {
		thresh := min(max(s.minRTT/8, int64(4*time.Millisecond)), int64(16*time.Millisecond))
		if s.roundMin >= s.minRTT+thresh {
			s.ssthresh = s.cwnd
		}
	}
}

// onCongestion is the once-per-episode window reduction.
func (s *sender) onCongestion(now int64) {
	if s.cc == Reno {
		s.ssthresh = math.Max(s.cwnd/2, 2)
		s.cwnd = s.ssthresh
		return
	}
	s.epochStart = 0
	if s.cwnd < s.wMax {
		s.wMax = float64(s.cwnd*(1+cubicBeta)) / 2 // fast convergence
	} else {
		s.wMax = s.cwnd
	}
	s.ssthresh = math.Max(float64(s.cwnd*cubicBeta), 2)
	s.cwnd = s.ssthresh
}

// grow applies window growth for acked newly delivered segments.
func (s *sender) grow(now int64, acked float64) {
	if s.cwnd < s.ssthresh {
		s.cwnd = math.Min(s.cwnd+acked, math.Min(s.ssthresh, float64(s.rwnd)))
		return
	}
	if s.cc == Reno {
		s.cwnd = math.Min(s.cwnd+acked/s.cwnd, float64(s.rwnd))
		return
	}
	if s.epochStart == 0 {
		s.epochStart = now
		if s.cwnd < s.wMax {
			s.k = math.Cbrt((s.wMax - s.cwnd) / cubicC)
			s.origin = s.wMax
		} else {
			s.k = 0
			s.origin = s.cwnd
		}
		s.wEst = s.cwnd
	}
	t := float64(now+s.minRTT-s.epochStart) / 1e9
	d := t - s.k
	target := s.origin + float64(cubicC*(d*d*d))
	cnt := 100 * s.cwnd
	if target > s.cwnd {
		cnt = s.cwnd / (target - s.cwnd)
	}
	// TCP-friendly region: never grow slower than Reno would.
	s.wEst += float64(3*(1-cubicBeta)/(1+cubicBeta)) * acked / s.cwnd
	if s.wEst > s.cwnd {
		if c := s.cwnd / (s.wEst - s.cwnd); c < cnt {
			cnt = c
		}
	}
	if cnt < 0.01 {
		cnt = 0.01
	}
	s.cwnd += acked / cnt
	if limit := float64(s.rwnd); s.cwnd > limit {
		s.cwnd = limit // not window-limited: do not grow past what may be sent
	}
}

// undoTimeout reverts a spurious timeout: the segments marked lost are in
// flight after all, and the window is what it was.
func (s *sender) undoTimeout() {
	s.cwnd, s.ssthresh = s.undoCwnd, s.undoSsthresh
	var recs []sendRecord
	for i := 0; i < s.segs.len(); i++ {
		seg := s.segs.at(i)
		if seg.state == segLost {
			seg.state = segInFlight
			s.inflight++
		}
		if seg.state == segInFlight {
			recs = append(recs, sendRecord{s.sndUna + int32(i), seg.sentAt})
		}
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].sentAt < recs[b].sentAt })
	s.sendOrder.reset()
	for _, r := range recs {
		s.sendOrder.push(r)
	}
}

// onTimeout is the retransmission timeout: everything outstanding is lost,
// the window collapses to one segment and the timer backs off.
func (s *sender) onTimeout(now int64) {
	s.timeouts++
	if s.rtoAt0 == 0 {
		s.undoCwnd, s.undoSsthresh = s.cwnd, s.ssthresh
	}
	s.rtoAt0 = now
	for i := 0; i < s.segs.len(); i++ {
		seg := s.segs.at(i)
		if seg.state == segInFlight {
			seg.state = segLost
			s.lost.push(s.sndUna + int32(i))
		}
	}
	s.inflight = 0
	s.sendOrder.reset()
	if s.cc == Reno {
		s.ssthresh = math.Max(s.cwnd/2, 2)
	} else {
		s.wMax = s.cwnd
		s.epochStart = 0
		s.ssthresh = math.Max(float64(s.cwnd*cubicBeta), 2)
	}
	s.cwnd = 1
	s.inRecovery = false
	s.rto = min(2*s.rto, int64(maxRTO))
	s.rtoAt = now + s.rto
}

// receiver is the receiving side: cumulative ack, out-of-order segments
// held, delayed acks (every second full segment, or after 40 ms), and an
// immediate ack for anything out of order or filling a hole.
type receiver struct {
	rcvNxt    int32
	ooo       []bool // ring of received segments above rcvNxt
	oooCount  int
	pending   int   // in-order segments not yet acknowledged
	ackAt     int64 // delayed-ack deadline, 0 = none
	lastEcho  int64
	delivered int64 // unique segments delivered in order (goodput)
}

// onData records a segment and returns whether to ack now and the SACK.
func (r *receiver) onData(now int64, seq int32, sent int64) (ackNow bool, sack int32) {
	r.lastEcho = sent
	switch {
	case seq < r.rcvNxt:
		return true, -1 // duplicate: tell the sender at once
	case seq == r.rcvNxt:
		r.rcvNxt++
		r.delivered++
		filled := false
		for r.oooCount > 0 && r.has(r.rcvNxt) {
			r.clear(r.rcvNxt)
			r.rcvNxt++
			r.delivered++
			filled = true
		}
		if filled || r.oooCount > 0 {
			r.pending = 0
			r.ackAt = 0
			return true, -1
		}
		r.pending++
		if r.pending >= 2 {
			r.pending = 0
			r.ackAt = 0
			return true, -1
		}
		if r.ackAt == 0 {
			r.ackAt = now + int64(delayedAckMax)
		}
		return false, -1
	default:
		r.set(seq)
		r.pending = 0
		r.ackAt = 0
		return true, seq
	}
}

func (r *receiver) slot(seq int32) int { return int(seq) & (len(r.ooo) - 1) }

func (r *receiver) has(seq int32) bool {
	if len(r.ooo) == 0 || int(seq-r.rcvNxt) >= len(r.ooo) {
		return false
	}
	return r.ooo[r.slot(seq)]
}

func (r *receiver) set(seq int32) {
	for int(seq-r.rcvNxt) >= len(r.ooo) {
		r.growOOO()
	}
	if !r.ooo[r.slot(seq)] {
		r.ooo[r.slot(seq)] = true
		r.oooCount++
	}
}

func (r *receiver) clear(seq int32) {
	r.ooo[r.slot(seq)] = false
	r.oooCount--
}

func (r *receiver) growOOO() {
	size := 2 * len(r.ooo)
	if size == 0 {
		size = 1024
	}
	n := make([]bool, size)
	for i := range r.ooo {
		seq := r.rcvNxt + int32(i)
		if r.ooo[r.slot(seq)] {
			n[int(seq)&(size-1)] = true
		}
	}
	r.ooo = n
}
