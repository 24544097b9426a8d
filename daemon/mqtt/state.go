// SPDX-License-Identifier: Apache-2.0

package mqtt

import (
	"strings"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/shape"
)

// The switch's payloads, Home Assistant's defaults: ON is shaping, OFF
// paused.
const (
	payloadOn  = "ON"
	payloadOff = "OFF"
)

// The availability payloads.
const (
	online  = "online"
	offline = "offline"
)

// maxStateText bounds a text sensor's state: Home Assistant keeps at most
// 255 characters of it.
const maxStateText = 255

// daemonState is the document on the daemon's state topic.
type daemonState struct {
	// Shaping is the switch of every link: OFF while every link is
	// paused.
	Shaping     string     `json:"shaping"`
	PausedUntil *time.Time `json:"paused_until"`
	// ActiveLinks counts the links shaped or measured now.
	ActiveLinks int    `json:"active_links"`
	Version     string `json:"version"`
}

// linkState is the document on a link's state topic. A value the link
// does not have now is null, which Home Assistant shows as unknown.
type linkState struct {
	// Active: an interface of the network has this link now.
	Active bool `json:"active"`
	// Shaping is the link's switch: OFF while a pause holds it.
	Shaping     string     `json:"shaping"`
	PausedUntil *time.Time `json:"paused_until"`
	// Controller is running, idle, sleeping or stalled, else paused,
	// inactive, or none (no controller: a fixed or off link).
	Controller string `json:"controller"`
	// The shapers' rates and the traffic the link carried, Mbit/s.
	DownloadRate     *float64 `json:"download_rate_mbit"`
	UploadRate       *float64 `json:"upload_rate_mbit"`
	DownloadAchieved *float64 `json:"download_achieved_mbit"`
	UploadAchieved   *float64 `json:"upload_achieved_mbit"`
	// RTT is the round trip now (the idle baseline plus both directions'
	// delay above it), Baseline the idle round trip, ms.
	RTT      *float64 `json:"rtt_ms"`
	Baseline *float64 `json:"baseline_ms"`
	// Grade is the bufferbloat grade (A+ … F) of the delay the link adds
	// now, in DSLReports' bands.
	Grade *string `json:"grade"`
	// The shapers' drops since they were installed.
	DownloadDrops *uint64 `json:"download_drops"`
	UploadDrops   *uint64 `json:"upload_drops"`
	// Advice is what status says of the link's bounds, "none" when it
	// says nothing.
	Advice string `json:"advice"`
}

// pausedUntil is when the pauses in st stop holding link ("" every link).
func pausedUntil(st statusapi.Status, link string) *time.Time {
	var until time.Time
	for _, p := range st.Pauses {
		if (p.Link == link || p.Link == statusapi.AllLinks) && p.Until.After(until) && p.RemainingSeconds > 0 {
			until = p.Until
		}
	}
	if until.IsZero() {
		return nil
	}
	u := until.UTC()
	return &u
}

// switchState is a switch's state for a pause that ends at until.
func switchState(until *time.Time) string {
	if until != nil {
		return payloadOff
	}
	return payloadOn
}

func newDaemonState(st statusapi.Status) daemonState {
	until := pausedUntil(st, statusapi.AllLinks)
	return daemonState{Shaping: switchState(until), PausedUntil: until, ActiveLinks: len(st.Links), Version: st.Daemon.Version}
}

// policyNames are the names of every policy in force, each link macake
// knows: the links published.
func policyNames(st statusapi.Status) []string {
	var out []string
	for _, p := range st.Policies {
		out = append(out, p.Name)
	}
	return out
}

// newLinkState is link's document from the status.
func newLinkState(st statusapi.Status, link string) linkState {
	until := pausedUntil(st, link)
	s := linkState{Shaping: switchState(until), PausedUntil: until, Controller: "inactive", Advice: "none"}
	var l *statusapi.Link
	for i := range st.Links {
		if st.Links[i].Name == link {
			l = &st.Links[i]
		}
	}
	if l == nil {
		if until != nil {
			s.Controller = "paused"
		}
		return s
	}
	s.Active = true
	switch c := l.Controller; {
	case until != nil:
		s.Controller = "paused"
	case c == nil:
		s.Controller = "none"
	default:
		s.Controller = c.Status
	}
	for _, sh := range l.Shapers {
		if sh.NotShaped != "" {
			continue
		}
		rate, drops := &s.UploadRate, &s.UploadDrops
		if sh.Direction == shape.Download.String() {
			rate, drops = &s.DownloadRate, &s.DownloadDrops
		}
		*rate = mbit(sh.RateBits)
		if sh.Stats != nil {
			d := sh.Stats.Drops
			*drops = &d
		}
	}
	if c := l.Controller; c != nil {
		s.DownloadAchieved, s.UploadAchieved = mbit(c.Download.AchievedBits), mbit(c.Upload.AchievedBits)
		if c.Responses > 0 {
			s.RTT, s.Baseline = ms(c.RTTSeconds()), ms(c.IdleRTTSeconds)
			g := string(measure.GradeFor(time.Duration((c.RTTSeconds() - c.IdleRTTSeconds) * float64(time.Second))))
			s.Grade = &g
		}
	}
	if len(l.Advice) > 0 {
		msgs := make([]string, len(l.Advice))
		for i, a := range l.Advice {
			msgs[i] = a.Message
		}
		s.Advice = truncate(strings.Join(msgs, "; "), maxStateText)
	}
	return s
}

// mbit is a rate in Mbit/s, to the kbit/s.
func mbit(bits int64) *float64 {
	v := float64(bits/1000) / 1000
	return &v
}

// ms is a duration in seconds in ms, to the µs.
func ms(seconds float64) *float64 {
	v := float64(int64(seconds*1e6+0.5)) / 1000
	return &v
}

// truncate cuts s to at most n bytes, at a rune's start, with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
