// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/macake/macake/config/units"
	"github.com/macake/macake/internal/suggest"
	"github.com/macake/macake/shape"
)

// Link is one validated policy file: the link's name (the file stem), the
// file it came from, and its policy with every default filled in.
type Link struct {
	// Name is the file stem: "starlink" for links.d/starlink.toml.
	Name string
	// File is the path the policy was read from.
	File string
	Policy
}

// Policy is the content of one policy file. The toml tags are the file's
// keys; docs/CONFIG.md documents every one of them (a test checks).
type Policy struct {
	Description string    `toml:"description"`
	Match       MatchKeys `toml:"match"`
	Shaper      Shaper    `toml:"shaper"`
	Autorate    Autorate  `toml:"autorate"`
	Balanced    Balanced  `toml:"balanced"`
	Cake        Cake      `toml:"cake"`
}

// MatchKeys says on which network a policy applies. Interface is required; the
// other keys are optional and, when given, must equal the interface's facts.
type MatchKeys struct {
	Interface  string       `toml:"interface"`
	GatewayMAC HardwareAddr `toml:"gateway_mac"`
	GatewayIP  netip.Addr   `toml:"gateway_ip"`
	SSID       string       `toml:"ssid"`
	// Priority orders policies that match at once: higher wins.
	Priority int `toml:"priority"`
}

// Keys returns how many optional match keys (gateway_mac, gateway_ip,
// ssid) the policy gives: its specificity, the second tie-breaker.
func (m MatchKeys) Keys() int {
	n := 0
	if len(m.GatewayMAC) > 0 {
		n++
	}
	if m.GatewayIP.IsValid() {
		n++
	}
	if m.SSID != "" {
		n++
	}
	return n
}

// Shaper is the [shaper] table: the mode and the base rates.
type Shaper struct {
	Mode Mode `toml:"mode"`
	// DownloadMode and UploadMode shape one direction otherwise than Mode
	// says (autorate, fixed or off); "" takes Mode's (DirectionMode).
	DownloadMode DirectionMode `toml:"download_mode"`
	UploadMode   DirectionMode `toml:"upload_mode"`
	// Download and Upload are the start/base rates (autorate, balanced) or
	// the rates (fixed); Auto means 95 % of the measured capacity.
	Download units.RateOrAuto `toml:"download"`
	Upload   units.RateOrAuto `toml:"upload"`
	// Queue is the pipe's byte queue; Auto resizes it with every rate change.
	Queue units.SizeOrAuto `toml:"queue"`
	// Overhead and MPU describe per-packet framing in bytes (0-256), which
	// the controller compensates in the pipe rate; overhead may be one of
	// CAKE's framing keywords instead (see Overhead).
	Overhead Overhead `toml:"overhead"`
	MPU      int      `toml:"mpu"`
}

// Autorate is the [autorate] table: the controller's bounds, probes and
// tunables. Defaults follow cake-autorate (see Defaults).
type Autorate struct {
	Download Bounds `toml:"download"`
	Upload   Bounds `toml:"upload"`
	// Reflectors are the probe targets (IP literals only) and how each is
	// probed: ICMP, a TCP handshake or a UDP echo to a port, or "auto"
	// (see Reflector). An address is listed once.
	Reflectors []Reflector `toml:"reflectors"`
	// ActiveReflectors is how many reflectors are probed at once (upstream
	// no_pingers); the rest are spares for replacement.
	ActiveReflectors int `toml:"active_reflectors"`
	// ProbeInterval is the probe interval per reflector (upstream
	// reflector_ping_interval_s).
	ProbeInterval units.Duration `toml:"probe_interval"`
	// DelayThreshold: a sample whose one-way delay exceeds the baseline by
	// more is "delayed" (upstream *_owd_delta_delay_thr_ms).
	DelayThreshold units.Duration `toml:"delay_threshold"`
	// Controller selects the control law: macake's tuned one (default) or
	// upstream cake-autorate's exactly.
	Controller ControlLaw `toml:"controller"`
	// FullIncreaseBelow: window average delay delta at or below which the
	// full increase applies (upstream *_avg_owd_delta_max_adjust_up_thr_ms).
	FullIncreaseBelow units.Duration `toml:"full_increase_below"`
	// FullCutAbove: window average at or above which the full cut applies
	// (upstream *_avg_owd_delta_max_adjust_down_thr_ms).
	FullCutAbove units.Duration `toml:"full_cut_above"`
	// BufferbloatWindow and BufferbloatSamples: bufferbloat when at least
	// BufferbloatSamples of the last BufferbloatWindow samples are delayed.
	BufferbloatWindow  int `toml:"bufferbloat_window"`
	BufferbloatSamples int `toml:"bufferbloat_samples"`
	// MaxCut is the strongest cut factor and MaxIncrease the largest
	// increase factor (upstream shaper_rate_max_adjust_*).
	MaxCut      float64 `toml:"max_cut"`
	MaxIncrease float64 `toml:"max_increase"`
	// HighLoad is the fraction of the shaper rate above which load is high.
	HighLoad float64 `toml:"high_load"`
	// ActiveThreshold: achieved rates at or below it count as idle
	// (upstream connection_active_thr_kbps).
	ActiveThreshold units.Rate `toml:"active_threshold"`
	// CutRefractory is the minimum spacing of cuts; DecayRefractory of
	// decay steps.
	CutRefractory   units.Duration `toml:"cut_refractory"`
	DecayRefractory units.Duration `toml:"decay_refractory"`
	// ResponseDeadline: a reflector silent for longer gets an offence.
	ResponseDeadline units.Duration `toml:"response_deadline"`
	// Sleep stops probing after SleepAfter of idle; MinRatesOnSleep then
	// drops both rates to their minimum (upstream
	// min_shaper_rates_enforcement).
	Sleep           bool           `toml:"sleep"`
	SleepAfter      units.Duration `toml:"sleep_after"`
	MinRatesOnSleep bool           `toml:"min_rates_on_sleep"`

	// Internal holds the controller's remaining constants. They are not
	// policy-file keys; they live here so that every default is in one
	// place (Defaults).
	Internal Internal `toml:"-"`
}

// Bounds are one direction's hard floor and ceiling for the controller.
// Zero values mean "not given": Link.Rates derives them.
type Bounds struct {
	Min units.Rate `toml:"min"`
	// Max may be "auto": the highest measured capacity.
	Max units.RateOrAuto `toml:"max"`
}

// Internal are the cake-autorate constants a policy cannot change (see
// reference/autorate.md §3; names follow upstream's where they exist).
type Internal struct {
	MinCut                float64       // shaper_rate_min_adjust_down_bufferbloat
	MinIncrease           float64       // shaper_rate_min_adjust_up_load_high
	Decay                 float64       // shaper_rate_adjust_down_load_low
	Recover               float64       // shaper_rate_adjust_up_load_low
	AlphaBaselineIncrease float64       // alpha_baseline_increase
	AlphaBaselineDecrease float64       // alpha_baseline_decrease
	AlphaDeltaEWMA        float64       // alpha_delta_ewma
	StaleResponse         time.Duration // responses older than this change no rate
	HealthCheckInterval   time.Duration // reflector_health_check_interval_s
	MisbehavingWindow     int           // reflector_misbehaving_detection_window (checks)
	MisbehavingThreshold  int           // reflector_misbehaving_detection_thr (offences)
	ReplacementInterval   time.Duration // reflector_replacement_interval_mins
	ComparisonInterval    time.Duration // reflector_comparison_interval_mins
	BaselineSumDeltaMax   time.Duration // reflector_sum_owd_baselines_delta_thr_ms
	DeltaEWMADeltaMax     time.Duration // reflector_owd_delta_ewma_delta_thr_ms
	RandomizeReflectors   bool          // randomize_reflectors
	RetainReflectorStats  bool          // retain_reflector_stats
	StallSpacings         int           // stall_detection_thr (response spacings)
	StallRate             units.Rate    // connection_stall_thr_kbps
	GlobalPingTimeout     time.Duration // global_ping_response_timeout_s
	MonitorInterval       time.Duration // monitor_achieved_rates_interval_ms
}

// Balanced is the [balanced] table, read only in mode "balanced": the
// shaper stays out of the way until a standing queue lasts EngageAfter,
// and steps aside again after ReleaseAfter of clean latency.
type Balanced struct {
	EngageAfter  units.Duration `toml:"engage_after"`
	ReleaseAfter units.Duration `toml:"release_after"`
}

// Cake is the [cake] table: options only a CAKE backend (Linux with
// sch_cake) can honour. Empty strings mean CAKE's own default; Defaults
// holds the others'.
type Cake struct {
	Diffserv         Diffserv  `toml:"diffserv"`
	EgressIsolation  Isolation `toml:"egress_isolation"`
	IngressIsolation Isolation `toml:"ingress_isolation"`
	NAT              bool      `toml:"nat"`
	ACKFilter        bool      `toml:"ack_filter"`
	// Wash clears DSCP marks after CAKE has sorted packets into tins.
	Wash bool `toml:"wash"`
	// SplitGSO splits GSO super-packets into packets (CAKE's default).
	SplitGSO bool `toml:"split_gso"`
	// RTT is the round-trip time CAKE tunes its AQM for; 0 = CAKE's own.
	RTT units.Duration `toml:"rtt"`
	// MemLimit caps CAKE's queue memory; 0 = CAKE's own limit.
	MemLimit units.Size `toml:"memlimit"`
	// LinkLayer is the cell framing CAKE compensates.
	LinkLayer LinkLayer `toml:"link_layer"`
}

// IsZero reports whether no CAKE option differs from its default.
func (c Cake) IsZero() bool { return c == Defaults.Cake }

// Mode is how a link is shaped.
type Mode string

// The modes. Autorate is the default.
const (
	// ModeAutorate steers the rates from measured latency (cake-autorate).
	ModeAutorate Mode = "autorate"
	// ModeBalanced shapes only while a standing queue is seen.
	ModeBalanced Mode = "balanced"
	// ModeFixed shapes at the configured rates; the controller only observes.
	ModeFixed Mode = "fixed"
	// ModeOff installs nothing; the controller only observes.
	ModeOff Mode = "off"
)

// Modes lists every Mode in the order the docs give them.
var Modes = []Mode{ModeAutorate, ModeBalanced, ModeFixed, ModeOff}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(b []byte) error { return ParseEnum("mode", b, Modes, m) }

// DirectionMode is how one direction of a link is shaped: steered from
// latency, at a fixed rate, or not at all.
type DirectionMode string

// The direction modes.
const (
	// DirAutorate steers the direction's rate from measured latency (and
	// in mode balanced, while engaged).
	DirAutorate DirectionMode = "autorate"
	// DirFixed shapes the direction at its configured rate.
	DirFixed DirectionMode = "fixed"
	// DirOff leaves the direction unshaped.
	DirOff DirectionMode = "off"
)

// DirectionModes lists every DirectionMode in the order the docs give them.
var DirectionModes = []DirectionMode{DirAutorate, DirFixed, DirOff}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *DirectionMode) UnmarshalText(b []byte) error {
	return ParseEnum("direction mode", b, DirectionModes, m)
}

// DirectionMode returns how direction d is shaped: its own key
// (download_mode, upload_mode), else the link's mode's: fixed and off for
// those modes, autorate for autorate and balanced.
func (s Shaper) DirectionMode(d shape.Direction) DirectionMode {
	if own := (shape.ByDirection[DirectionMode]{Upload: s.UploadMode, Download: s.DownloadMode}).Of(d); own != "" {
		return own
	}
	switch s.Mode {
	case ModeFixed:
		return DirFixed
	case ModeOff:
		return DirOff
	}
	return DirAutorate
}

// Steers reports whether a controller sets direction d's rate.
func (s Shaper) Steers(d shape.Direction) bool { return s.DirectionMode(d) == DirAutorate }

// Shapes reports whether direction d is shaped at all.
func (s Shaper) Shapes(d shape.Direction) bool { return s.DirectionMode(d) != DirOff }

// Effective is the link's mode as its directions make it: balanced stays
// balanced; otherwise autorate when a direction is steered, fixed when
// one is shaped at its rate, off when neither is shaped.
func (s Shaper) Effective() Mode {
	switch {
	case s.Mode == ModeBalanced:
		return ModeBalanced
	case s.Steers(shape.Upload) || s.Steers(shape.Download):
		return ModeAutorate
	case s.Shapes(shape.Upload) || s.Shapes(shape.Download):
		return ModeFixed
	}
	return ModeOff
}

// Mixed reports whether the two directions have different modes.
func (s Shaper) Mixed() bool { return s.DirectionMode(shape.Upload) != s.DirectionMode(shape.Download) }

// ControlLaw selects the rate controller's law.
type ControlLaw string

// The control laws. LawMacake is the default.
const (
	// LawMacake is cake-autorate's law plus the deviations that won in
	// macake's simulator (tuning.MacakeImprovements; docs/MEASUREMENTS.md).
	LawMacake ControlLaw = "macake"
	// LawUpstream is cake-autorate's law exactly, as specified in
	// reference/autorate.md: for comparisons, or to rule macake's changes out.
	LawUpstream ControlLaw = "upstream"
)

// ControlLaws lists every ControlLaw in the order the docs give them.
var ControlLaws = []ControlLaw{LawMacake, LawUpstream}

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *ControlLaw) UnmarshalText(b []byte) error {
	return ParseEnum("controller", b, ControlLaws, c)
}

// Diffserv is a CAKE priority-tin scheme.
type Diffserv string

// Diffservs lists the accepted Diffserv values.
var Diffservs = []Diffserv{"diffserv3", "diffserv4", "diffserv8", "besteffort", "precedence"}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Diffserv) UnmarshalText(b []byte) error { return ParseEnum("diffserv", b, Diffservs, d) }

// Isolation is a CAKE flow-isolation mode.
type Isolation string

// Isolations lists the accepted Isolation values.
var Isolations = []Isolation{"triple-isolate", "dual-srchost", "dual-dsthost", "srchost", "dsthost", "hosts", "flows", "flowblind"}

// UnmarshalText implements encoding.TextUnmarshaler.
func (i *Isolation) UnmarshalText(b []byte) error {
	return ParseEnum("isolation mode", b, Isolations, i)
}

// ParseEnum sets *dst to the value in allowed that equals b exactly, or
// explains what the accepted values are: the one UnmarshalText of every
// enumerated key, the policies' and the settings' (config/settings).
func ParseEnum[T ~string](what string, b []byte, allowed []T, dst *T) error {
	s := string(b)
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if string(a) == s {
			*dst = a
			return nil
		}
		names[i] = string(a)
	}
	msg := fmt.Sprintf("unknown %s %q; use one of %s", what, s, strings.Join(names, ", "))
	if sug := suggest.Closest(s, names); sug != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", sug)
	}
	return fmt.Errorf("%s", msg)
}

// Rate returns the base rate setting of direction d.
func (s Shaper) Rate(d shape.Direction) units.RateOrAuto {
	return shape.ByDirection[units.RateOrAuto]{Upload: s.Upload, Download: s.Download}.Of(d)
}

// Bounds returns the controller bounds of direction d.
func (a Autorate) Bounds(d shape.Direction) Bounds {
	return shape.ByDirection[Bounds]{Upload: a.Upload, Download: a.Download}.Of(d)
}
