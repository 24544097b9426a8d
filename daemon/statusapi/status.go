// SPDX-License-Identifier: Apache-2.0

// Package statusapi is how `macake status` talks to `macake watch`: a unix
// socket in the state directory (watch.sock; root-owned, mode 0660, group
// the operator group, else admin on macOS), one JSON request line in, one
// JSON document out, versioned by FormatVersion. The socket reads, with
// two exceptions, each checked from the peer's credentials
// (daemon/operator): root and the operator group may pause and resume the
// shaping (RequestPause), and root alone (or the daemon's own user) may
// hand the daemon a measurement (RequestMeasurement), because while the
// daemon runs it holds the state lock and is the state file's only
// writer.
//
// The same Status document describes a machine without a daemon (the
// static picture `macake status` assembles itself), with Daemon.Running
// false and no controller state. WriteText and WriteSummary print it for a
// person.
package statusapi

import (
	"net/netip"
	"time"

	"github.com/macake/macake/desired"
	"github.com/macake/macake/diag"
)

// FormatVersion is the version of the Status document and of the request.
// A client accepts any document of its major version; new fields arrive as
// minor versions (1.2: daemon.permission_denied and shapers[].not_shaped).
// 2.0: every error and warning is an object of the one error schema
// (package diag): problems, backend.live_error, links[].error,
// last_apply.error and last_apply.warnings were strings; config_errors
// leave out line and column for a problem with a whole file. 2.1:
// shapers[].stats, backend.stats_error, daemon.paused_until, and on
// request links[].history and events. 2.2: pauses, links[].paused_until
// (a pause request's pause_link, and its answer's pause),
// links[].download_mode and links[].upload_mode, links[].advice. 2.3:
// daemon.log_file. 2.4: shapers[].stats.tins (CAKE's tins).
const FormatVersion = "2.4"

// Status is everything `macake status` shows. Rates are bit/s, sizes
// bytes, durations seconds (to the microsecond), times RFC 3339, as in the
// daemon's log and `macake apply --json`.
type Status struct {
	FormatVersion string `json:"format_version"`
	// Daemon says whether watch answered, and about it.
	Daemon Daemon `json:"daemon"`
	// Backend names the shaping backend and what it owns.
	Backend Backend `json:"backend"`
	// Interfaces are the network's facts as matching saw them.
	Interfaces []desired.InterfaceReport `json:"interfaces"`
	// Policies are every policy in force (the last good version of a
	// broken file) with matching's verdict.
	Policies []Policy `json:"policies"`
	// Links are the active links: one per interface with a matching policy.
	Links []Link `json:"links"`
	// LastApply is the daemon's last reconcile; nil without a daemon.
	LastApply *Apply `json:"last_apply,omitempty"`
	// ConfigErrors are the policy file errors in force.
	ConfigErrors []ConfigError `json:"config_errors"`
	// Problems keep shaping from being what the files say, each with what
	// to do (a missing pf hook line, unreadable link facts, ...).
	Problems []diag.Diagnostic `json:"problems"`
	// DriftRepairs counts repairs since the daemon started, by drift kind
	// (the words of the log's drift events).
	DriftRepairs map[string]int `json:"drift_repairs,omitempty"`
	// Profiles are the state file's per-network profiles.
	Profiles []Profile `json:"profiles"`
	// Events are the daemon's last log events, oldest first; only when
	// asked (Query.Events).
	Events []Event `json:"events,omitempty"`
	// Pauses are the pauses of the shaping in force, by link ("*" first:
	// every link).
	Pauses []Pause `json:"pauses"`
}

// AllLinks is the Link of a pause of every link.
const AllLinks = "*"

// Pause is a pause of macake's shaping in force (RequestPause): a lease
// that ends by itself.
type Pause struct {
	// Link is the paused link, or AllLinks.
	Link  string    `json:"link"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// RemainingSeconds is how long it runs on, as of the document.
	RemainingSeconds float64 `json:"remaining_seconds"`
	// By says who asked: a user's name, the status page, macake bench
	// --compare.
	By string `json:"by,omitempty"`
}

// Daemon describes the running `macake watch`, or why there is none.
type Daemon struct {
	// Running is whether watch runs: it answered, or (PermissionDenied)
	// it holds the state lock although this user may not ask it.
	Running bool `json:"running"`
	// PermissionDenied: the socket exists but this user may not connect
	// (it answers root, and on macOS the admin group, only), so the rest
	// of the document is the static picture, not the daemon's view.
	PermissionDenied bool `json:"permission_denied,omitempty"`
	// Socket is the status socket's path.
	Socket        string    `json:"socket"`
	PID           int       `json:"pid,omitempty"`
	Version       string    `json:"version,omitempty"`
	StartedAt     time.Time `json:"started_at,omitzero"`
	UptimeSeconds float64   `json:"uptime_seconds,omitempty"`
	ConfigDir     string    `json:"config_dir,omitempty"`
	StateDir      string    `json:"state_dir,omitempty"`
	// LogFile is the file the daemon logs to, "" for its standard error
	// (the journal, under systemd): where a bug report finds its log.
	LogFile string `json:"log_file,omitempty"`
	// Note says why the daemon is not running or could not be asked.
	Note string `json:"note,omitempty"`
	// PausedUntil is when a pause of every link's shaping (RequestPause
	// without a link) ends; Status.Pauses lists each pause.
	PausedUntil time.Time `json:"paused_until,omitzero"`
}

// Backend names the shaping backend and the system state it owns.
type Backend struct {
	// Name is "pf" or "tc"; System "pf/dummynet"; Scope what it owns.
	Name   string `json:"name,omitempty"`
	System string `json:"system,omitempty"`
	Scope  string `json:"scope,omitempty"`
	// LiveError says why the live state could not be read (static picture
	// only; e.g. it needs root).
	LiveError *diag.Diagnostic `json:"live_error,omitempty"`
	// StatsError says why the shapers' counters could not be read.
	StatsError *diag.Diagnostic `json:"stats_error,omitempty"`
}

// Policy is one policy with matching's verdict.
type Policy struct {
	Name      string `json:"name"`
	File      string `json:"file"`
	Interface string `json:"interface"`
	Mode      string `json:"mode"`
	Priority  int    `json:"priority"`
	Active    bool   `json:"active"`
	// Reason says why it is active or not.
	Reason string `json:"reason"`
	// LastGood is set when the file has an error and this is its last good
	// version, still in force.
	LastGood bool `json:"last_good,omitempty"`
}

// Link is one active link: its shapers and its controller.
type Link struct {
	Name      string `json:"name"`
	Interface string `json:"interface"`
	Mode      string `json:"mode"`
	// DownloadMode and UploadMode are how each direction is shaped:
	// autorate, fixed or off (the policy's download_mode and upload_mode,
	// else what its mode means for each).
	DownloadMode string `json:"download_mode"`
	UploadMode   string `json:"upload_mode"`
	// ProfileKey is the state file profile of this network.
	ProfileKey string `json:"profile_key"`
	// Shaped is whether shapers are installed for it (not in mode off,
	// nor in balanced mode while released).
	Shaped bool `json:"shaped"`
	// Shapers are the live pipes (or tc classes), upload first.
	Shapers []Shaper `json:"shapers"`
	// Controller is the link's controller; nil when none runs.
	Controller *Controller `json:"controller,omitempty"`
	// Error keeps the link from being shaped as its policy says (e.g. an
	// "auto" rate that needs a measurement); the previous shaping stays.
	Error *diag.Diagnostic `json:"error,omitempty"`
	// History is the link's last minutes; only when asked (Query.History).
	History *History `json:"history,omitempty"`
	// PausedUntil is when the pause that keeps this link unshaped ends
	// (its own or every link's, whichever ends later).
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// Advice says which of its bounds to change, and how (daemon only).
	Advice []Advice `json:"advice,omitempty"`
}

// Advice is what the daemon's history says of a direction's bounds: it
// spent more than half of its loaded time in the last hour pinned at its
// max (the link carries more) or cut to its min (the min is above what the
// link carries without a queue). The daemon never edits the file.
type Advice struct {
	Direction string `json:"direction"`
	// Bound is "max" or "min".
	Bound string `json:"bound"`
	// Share is the share of the loaded time at the bound, over
	// LoadedSeconds loaded in the last WindowSeconds.
	Share         float64 `json:"share"`
	LoadedSeconds float64 `json:"loaded_seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	// CurrentBits is the bound now, SuggestedBits the one to set.
	CurrentBits   int64 `json:"current_bits_per_second"`
	SuggestedBits int64 `json:"suggested_bits_per_second"`
	// Message says it for a person; Edit is the line to put in File.
	Message string `json:"message"`
	File    string `json:"file"`
	Edit    string `json:"edit"`
}

// Shaper is one live shaper (a dummynet pipe, a tc class).
type Shaper struct {
	Direction string `json:"direction"`
	// Name names the object, e.g. "pipe 48001".
	Name       string `json:"name"`
	RateBits   int64  `json:"rate_bits_per_second"`
	QueueBytes int64  `json:"queue_bytes"`
	// Source says where the rate came from: controller, known-good,
	// policy, or live (read from the system by a status without daemon).
	Source string `json:"source,omitempty"`
	// NotShaped, when set, says why this direction is not shaped even
	// though the policy wants it (e.g. another tool's root qdisc is in
	// the way); RateBits is then only what macake would set.
	NotShaped string `json:"not_shaped,omitempty"`
	// Stats are the shaper's counters as last read; nil when they could
	// not be read (Backend.StatsError says why) or the backend has none.
	Stats *ShaperStats `json:"stats,omitempty"`
}

// ShaperStats are a shaper's counters, as `tc -s` shows them
// (backend.ShaperStats): cumulative since the shaper was created.
type ShaperStats struct {
	// Bytes and Packets are what the shaper took in (dummynet) or sent
	// (tc).
	Bytes   uint64 `json:"bytes"`
	Packets uint64 `json:"packets"`
	// Drops are packets dropped for a full queue.
	Drops uint64 `json:"drops"`
	// BacklogBytes and BacklogPackets are queued now.
	BacklogBytes   uint64 `json:"backlog_bytes"`
	BacklogPackets uint64 `json:"backlog_packets"`
	// Overlimits: times the shaper held a packet for the rate (tc only).
	Overlimits uint64 `json:"overlimits"`
	// Tins are CAKE's tins, lowest priority first; absent for a shaper
	// without them (htb, dummynet).
	Tins []TinStats `json:"tins,omitempty"`
	// ReadAt is when they were read.
	ReadAt time.Time `json:"read_at"`
}

// TinStats are one CAKE tin's counters (cumulative) and state at the
// reading (backend.TinStats), as CAKE's table in `tc -s qdisc show`.
type TinStats struct {
	// Name is the tin: bulk, best_effort, video, voice, or tin0 … tin7.
	Name string `json:"name"`
	// ThresholdBits is the rate the tin keeps its priority up to.
	ThresholdBits uint64 `json:"threshold_bits_per_second"`
	// Bytes and Packets entered the tin, the dropped ones included.
	Bytes   uint64 `json:"bytes"`
	Packets uint64 `json:"packets"`
	// Drops are CAKE's drops (AQM or memory limit), ECNMarks its marks
	// instead of drops, ACKDrops the ACKs its ACK filter removed.
	Drops    uint64 `json:"drops"`
	ECNMarks uint64 `json:"ecn_marks"`
	ACKDrops uint64 `json:"ack_drops"`
	// BacklogBytes are queued in the tin now.
	BacklogBytes uint64 `json:"backlog_bytes"`
	// The queueing delay CAKE measures of what the tin sends: its
	// moving average, peak and floor.
	AverageDelaySeconds float64 `json:"average_delay_seconds"`
	PeakDelaySeconds    float64 `json:"peak_delay_seconds"`
	BaseDelaySeconds    float64 `json:"base_delay_seconds"`
	// The tin's flows now: sparse (new or light), bulk (backlogged), and
	// unresponsive (not slowing down for drops).
	SparseFlows       uint64 `json:"sparse_flows"`
	BulkFlows         uint64 `json:"bulk_flows"`
	UnresponsiveFlows uint64 `json:"unresponsive_flows"`
}

// Controller is a link controller's state.
type Controller struct {
	Mode string `json:"mode"`
	// Status is running, idle, sleeping or stalled.
	Status string `json:"status"`
	// Shaping: its decisions reach the shaper (autorate; balanced engaged).
	Shaping bool `json:"shaping"`
	// Engaged is whether balanced mode has the shaper in place (always
	// true in autorate).
	Engaged bool `json:"engaged"`
	// Note explains a controller that cannot measure (no prober).
	Note                 string      `json:"note,omitempty"`
	IdleRTTSeconds       float64     `json:"idle_rtt_seconds"`
	SinceResponseSeconds float64     `json:"since_response_seconds"`
	Download             Direction   `json:"download"`
	Upload               Direction   `json:"upload"`
	Reflectors           []Reflector `json:"reflectors"`
	Responses            uint64      `json:"responses"`
	// Cuts are the bufferbloat cuts that lowered a rate: the log's
	// event=cut lines (a decay step is no cut).
	Cuts      uint64 `json:"cuts"`
	Increases uint64 `json:"increases"`
}

// RTTSeconds is the round trip now: the idle baseline plus both
// directions' delay above it, the mean over the bufferbloat window the
// controller steers by (the status history's RTT).
func (c Controller) RTTSeconds() float64 {
	return c.IdleRTTSeconds + c.Download.WindowAverageSeconds + c.Upload.WindowAverageSeconds
}

// Direction is one direction of a controller.
type Direction struct {
	// RateBits is the controller's rate; PipeRateBits what the shaper gets
	// for it (lower with overhead compensation).
	RateBits     int64 `json:"rate_bits_per_second"`
	PipeRateBits int64 `json:"pipe_rate_bits_per_second"`
	MinBits      int64 `json:"min_bits_per_second"`
	BaseBits     int64 `json:"base_bits_per_second"`
	MaxBits      int64 `json:"max_bits_per_second"`
	AchievedBits int64 `json:"achieved_bits_per_second"`
	LoadPercent  int   `json:"load_percent"`
	// Load is idle, low or high.
	Load                  string  `json:"load"`
	BaselineSeconds       float64 `json:"baseline_seconds"`
	DelayDeltaSeconds     float64 `json:"delay_delta_seconds"`
	WindowAverageSeconds  float64 `json:"window_average_seconds"`
	DelayThresholdSeconds float64 `json:"delay_threshold_seconds"`
	// Delayed samples in the window; Bufferbloat when they reach the vote.
	Delayed     int  `json:"delayed"`
	Bufferbloat bool `json:"bufferbloat"`
}

// Reflector is one active probe target.
type Reflector struct {
	Address string `json:"address"`
	// Probe is how it is probed: "icmp", "tcp" or "udp"; Port the TCP
	// or UDP port.
	Probe                string  `json:"probe,omitempty"`
	Port                 int     `json:"port,omitempty"`
	BaselineDownSeconds  float64 `json:"baseline_down_seconds"`
	BaselineUpSeconds    float64 `json:"baseline_up_seconds"`
	DeltaDownSeconds     float64 `json:"delta_down_seconds"`
	DeltaUpSeconds       float64 `json:"delta_up_seconds"`
	SinceResponseSeconds float64 `json:"since_response_seconds"`
	Responses            uint64  `json:"responses"`
	Offences             int     `json:"offences"`
}

// Apply is one reconcile of the daemon.
type Apply struct {
	At      time.Time `json:"at"`
	Trigger string    `json:"trigger"`
	// Result is no_changes, applied or failed.
	Result          string            `json:"result"`
	Created         int               `json:"created"`
	Updated         int               `json:"updated"`
	Removed         int               `json:"removed"`
	DurationSeconds float64           `json:"duration_seconds"`
	Error           *diag.Diagnostic  `json:"error,omitempty"`
	Warnings        []diag.Diagnostic `json:"warnings,omitempty"`
	// LastChange is when a reconcile last changed something.
	LastChange time.Time `json:"last_change,omitzero"`
}

// ConfigError is one policy file error in force: the error (its link is
// the one the file defines) and Kept, last_good or nothing.
type ConfigError struct {
	diag.Diagnostic
	Kept string `json:"kept,omitempty"`
}

// Profile is what the state file knows about one network.
type Profile struct {
	Key                  string    `json:"key"`
	Link                 string    `json:"link"`
	DownloadCapacityBits int64     `json:"download_capacity_bits_per_second,omitempty"`
	UploadCapacityBits   int64     `json:"upload_capacity_bits_per_second,omitempty"`
	IdleRTTSeconds       float64   `json:"idle_rtt_seconds,omitempty"`
	GoodDownloadBits     int64     `json:"good_download_bits_per_second,omitempty"`
	GoodUploadBits       int64     `json:"good_upload_bits_per_second,omitempty"`
	UpdatedAt            time.Time `json:"updated_at,omitzero"`
}

// Seconds is a duration in seconds with microsecond resolution, so 42.3 ms
// is 0.0423, not 0.042300000000000004.
func Seconds(d time.Duration) float64 { return float64(d/time.Microsecond) / 1e6 }

// ActiveReflectors returns each link's active probe targets as the daemon
// reports them: the set it exempts from shaping, which one-shot planning
// must use too while watch runs, or it sees the exemptions watch keeps for
// its controllers' current reflectors as drift.
func (s Status) ActiveReflectors() map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	for _, l := range s.Links {
		if l.Controller == nil || len(l.Controller.Reflectors) == 0 {
			continue
		}
		addrs := make([]netip.Addr, 0, len(l.Controller.Reflectors))
		for _, r := range l.Controller.Reflectors {
			if a, err := netip.ParseAddr(r.Address); err == nil {
				addrs = append(addrs, a)
			}
		}
		out[l.Name] = addrs
	}
	return out
}
