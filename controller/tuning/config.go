// SPDX-License-Identifier: Apache-2.0

package tuning

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/shape"
)

// Mode is how a link's controller behaves.
type Mode uint8

// The four modes of a policy's `shaper.mode`.
const (
	// ModeAutorate steers both pipes from measured latency (cake-autorate).
	ModeAutorate Mode = iota
	// ModeBalanced shapes nothing until a standing queue has lasted
	// Config.EngageAfter, then runs autorate until latency has been clean
	// for Config.ReleaseAfter, then stops shaping again.
	ModeBalanced
	// ModeFixed keeps the configured base rates; the controller observes only.
	ModeFixed
	// ModeOff shapes nothing; the controller observes only.
	ModeOff
)

var modeNames = [...]string{"autorate", "balanced", "fixed", "off"}

// String returns the policy-file spelling of the mode.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// MarshalText writes the policy-file spelling (for JSON and TOML).
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads a policy-file mode name.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// ParseMode reads a policy-file mode name.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q: use autorate, balanced, fixed or off", s)
}

// DirectionConfig holds the tunables that exist once per direction.
// Rates are in bit/s and are converted once, at controller.New, to whole kbit/s
// (rounded to nearest), which is the controller's internal unit.
type DirectionConfig struct {
	// MonitorOnly pins the direction at Base (min = max = base) and never
	// sends it to the backend (upstream adjust_*_shaper_rate = 0).
	MonitorOnly bool
	// Min is the hard floor (upstream min_*_shaper_rate_kbps), ≥ 1 kbit/s.
	Min int64
	// Base is where decay and recovery head for, and the start rate.
	Base int64
	// Max is the hard ceiling. A policy's max = "auto" is resolved by the
	// caller (highest measured capacity) before it reaches the controller.
	Max int64
	// Start is a known-good rate to start from (e.g. the last good rate in
	// the state file); 0 means Base. It is clamped to [Min, Max].
	Start int64
	// DelayThreshold: a sample whose one-way delay delta exceeds it votes
	// "delayed" (upstream *_owd_delta_delay_thr_ms, 30 ms).
	DelayThreshold time.Duration
	// FullIncreaseThreshold: window average at or below which the full
	// high-load increase applies (upstream *_avg_owd_delta_max_adjust_up_thr_ms, 10 ms).
	FullIncreaseThreshold time.Duration
	// FullCutThreshold: window average at or above which the strongest cut
	// applies (upstream *_avg_owd_delta_max_adjust_down_thr_ms, 60 ms).
	FullCutThreshold time.Duration
}

// MacakeImprovements returns the deviations macake's own control law turns
// on (policy key autorate.controller = "macake", the default). The law
// also takes tuned defaults for five upstream tunables (config.Defaults,
// config.UpstreamTunables) and a deeper achieved cut (AchievedCut 0.8).
// The set was chosen by leave-one-source-out tuning on 36 traces of six
// sources (docs/MEASUREMENTS.md, "How ours was built"): CutToAchieved,
// FastRecovery and JitterThreshold with those defaults. The rest are
// real-world fixes the simulator cannot judge, because it has no timer
// jitter, dying prober, failing backend or counter reset
// (MeasuredInterval, ProbeLiveness, SurfaceBackendErrors,
// DropCounterResets). BaseRecovery, SleepAtBase, PlateauHold, PeakRecovery,
// OutageHold, DirectionalCut, DrainCut, WholeRTT and DeadBand did not win
// and stay off.
func MacakeImprovements() Improvements {
	return Improvements{
		MeasuredInterval:     true,
		ProbeLiveness:        true,
		SurfaceBackendErrors: true,
		CutToAchieved:        true,
		FastRecovery:         true,
		JitterThreshold:      true,
		DropCounterResets:    true,
		SilentBackoff:        true,
	}
}

// DeadBandPPM is the dead band of Improvements.DeadBand, in millionths of
// the pipe's rate: 0.5 %, the smallest band measured in the simulator
// (docs/MEASUREMENTS.md "The dead band").
const DeadBandPPM = 5_000

// Improvements are macake's deliberate deviations from upstream
// cake-autorate (autorate.md §14.2). Every switch is off in DefaultConfig,
// which is then exactly upstream ("faithful mode"). To add one: add a bool
// here with its §14.2 number in the comment, branch on it where the
// behaviour differs, and give it a test that shows both settings.
type Improvements struct {
	// MeasuredInterval (§14.2 #1) divides byte deltas by the measured time
	// between the two counter reads (controller.LoadSample.At) instead of the nominal
	// monitor interval, removing the few-percent timing error.
	MeasuredInterval bool
	// SleepAtBase (§14.2 #3) brings an above-base rate down to base when
	// the controller goes to sleep, instead of freezing it there.
	SleepAtBase bool
	// ProbeLiveness (§14.2 #4, upstream PR #413) restarts probing whenever
	// no response has arrived for GlobalPingTimeout and probes were last
	// (re)started longer ago than that, in RUNNING as well as in STALL.
	ProbeLiveness bool
	// SurfaceBackendErrors (§14.2 #8): a failed apply (controller.ReportApply with an
	// error) leaves the last-applied rate unchanged, so the next rate update
	// sends the rate again. Upstream ignores the shaper tool's errors.
	SurfaceBackendErrors bool
	// CutToAchieved (macake, measured in the simulator): on bufferbloat, a
	// direction that was saturating its pipe within the last second is cut
	// to at most AchievedCut × its achieved rate, not only by the graded
	// factor. On a Mac the download counter counts what the link delivers
	// before the pipe, so once the link's queue fills the achieved rate is
	// the link's new capacity, and the pipe undershoots a capacity drop in
	// one step instead of after several 0.75–0.99 cuts 300 ms apart
	// (benchmark.md §3.1, floor 3; upstream cut to 0.9 × achieved before
	// v3.1.0). A direction that was not saturating (e.g. carrying only the
	// other direction's acks) keeps upstream's cut.
	CutToAchieved bool
	// FastRecovery (macake, with CutToAchieved): after an achieved-rate cut
	// the rate before it is remembered for 5 s, and each increase with a
	// clean window (no delayed sample) goes at least halfway back to it,
	// instead of the ×1.04 per 200 ms that takes seconds to climb back
	// after a brief dip. The download goes no higher than AchievedCut × its
	// achieved rate, which on a Mac is what the link delivered: the link
	// must show the capacity is back before the pipe takes it.
	FastRecovery bool
	// BaseRecovery (macake): below base under low or idle load with a clean
	// window, each decay step recovers a quarter of the gap to base instead
	// of 1 %. Upstream climbs from the minimum to base in about 140 s after
	// an outage, while TCP, backed off, cannot raise the load to "high"
	// that would allow increases (upstream issue #225, "stuck near the
	// minimum"); base is the rate the user configured as normal.
	BaseRecovery bool
	// PlateauHold (macake, with CutToAchieved): the achieved rate at a cut
	// is the link's capacity; a clean window climbs halfway back to 95 %
	// of it at once, and from there the increase grows from nothing back
	// to upstream's over 3 s, so a steady link is probed above its
	// capacity every few seconds instead of sawing across it every second
	// or two. The capacity is believed for 30 s.
	PlateauHold bool
	// PeakRecovery (macake): below 90 % of the highest capacity the link
	// showed in the last 30 s (at a cut, or carried with a clean window),
	// increases with a clean window grow each time they follow one
	// another (×1.04, ×1.04, ×1.08, … up to ×1.25), up to that capacity:
	// after a long dip the rate climbs back in about 2 s, where upstream
	// takes 6 s and FastRecovery, whose memory lasts 5 s, does not help.
	PeakRecovery bool
	// OutageHold (macake): while a direction that was saturating delivers
	// less than a tenth of its rate (an outage: radio silence, a
	// handover), bufferbloat does not cut it, for up to 5 s. Cuts during
	// an outage only leave the pipe at the floor when the link comes back,
	// and the queue they answer is stuck behind the outage, not made by
	// the pipe.
	OutageHold bool
	// DirectionalCut (autorate.md §14.2 #5): echo probes see the round
	// trip, so both directions vote alike; on bufferbloat the counters say
	// which link is full (a saturating direction whose link delivered less
	// than 95 % of its pipe's rate), and only that direction is cut. A
	// direction that is not saturating is not cut while another is; when
	// nothing tells the directions apart, both are cut as upstream does.
	DirectionalCut bool
	// DrainCut (macake, with CutToAchieved): the achieved cut goes deeper
	// the longer the queue, to clear it in about a second: a window
	// average delay of d cuts to (1 − d/1 s) × the achieved rate, between
	// half and AchievedCut of it. A standing queue of a second (a slow
	// start into a deep ISP buffer) otherwise drains at the 10 % of
	// headroom AchievedCut leaves, for ten seconds.
	DrainCut bool
	// WholeRTT (macake): with echo probes, the bufferbloat window and the
	// rate law take the whole rise of the round trip as each direction's
	// delay, where upstream takes half (RTT/2 as a one-way delay). A
	// queue forms in the loaded direction; half its rise hides half of it,
	// so upstream's 30 ms threshold waits for 60 ms of queue. One-way
	// samples (ICMP timestamps) are unchanged. Baselines and the
	// reflector ranking keep RTT/2.
	WholeRTT bool
	// DeadBand (macake, measured in the simulator, not kept): a small move
	// of the rate (an increase, a decay step or a recovery) that changes
	// it by less than DeadBandPPM of the rate the pipe has is not sent; the
	// rate goes on moving and is sent once it is DeadBandPPM away, or on
	// the next tick as a retry when it stops. Cuts, the bounds and base,
	// starts, sleeps, stalls and retries are always sent. It saves no
	// writes worth having: the law's own steps are 1 % or more, so 0.5 %
	// suppresses almost nothing, and 2–5 % change the dynamics, costing
	// score on some links (docs/MEASUREMENTS.md "The dead band").
	DeadBand bool
	// JitterThreshold (macake): the delay thresholds follow how much the
	// delay signal jitters. Upstream's 30 ms lets a steady link (Starlink,
	// fibre, 5G) hold 30 ms of standing queue before it reacts, which a
	// link whose delay jitters by a few milliseconds does not need; on a
	// bursty radio link the same 30 ms is what keeps jitter from voting.
	// The jitter is an EWMA of the second difference of consecutive
	// delays, which a queue growing or draining at a steady pace does not
	// raise; the delay and full-increase thresholds are scaled by
	// JitterScale × jitter / delay threshold, between JitterFloor and 1.
	// The full-cut threshold is not: the jitter says when to cut, the
	// queue's size how hard (on the kernel testbed's LTE replay, scaling it
	// too cut at the strongest factor on every 15 ms queue, twice in a row,
	// and kept half the goodput).
	JitterThreshold bool
	// DropCounterResets skips an achieved-rate sample whose byte counter
	// went backwards (interface reset) instead of reporting it as 0 kbit/s,
	// which upstream does and which looks like a spurious idle sample
	// (darwin-and-linux.md §3.6).
	DropCounterResets bool
	// SilentBackoff (macake): once as many replacements for missed health
	// checks as the pool has reflectors went by without a response from
	// any reflector (every one was tried, and the network blocks them
	// all, or is down), the next such replacement waits
	// SilentBackoffFirst, and each after it twice as long, up to
	// SilentBackoffMax; any response ends it. Upstream swaps a slot every
	// second or so for as long as nothing answers, and every swap changes
	// the probe exemptions the backend installs (issue 27: 1,093 swaps in
	// 10 minutes with every reflector dead). Trying the whole pool at the
	// normal pace first keeps finding the one reflector in 30 that
	// answers quick.
	SilentBackoff bool
}

// The SilentBackoff spacings of replacements while nothing answers.
const (
	SilentBackoffFirst = 2 * time.Second
	SilentBackoffMax   = 5 * time.Minute
)

// Config is every tunable of one link's controller. FromPolicy maps a
// policy file onto it; DefaultConfig returns upstream cake-autorate's
// defaults (autorate.md §3), which are config.Defaults.
type Config struct {
	// Mode selects autorate, balanced, fixed or off.
	Mode Mode

	// Download and Upload are the per-direction rates and thresholds.
	Download, Upload DirectionConfig

	// BufferbloatWindow is the number of recent samples (all reflectors
	// mixed) that vote (upstream bufferbloat_detection_window, 6; at most 64).
	BufferbloatWindow int
	// BufferbloatVotes is how many of them must be delayed to flag
	// bufferbloat (upstream bufferbloat_detection_thr, 3).
	BufferbloatVotes int

	// HighLoad is the fraction of the shaper rate above which the load
	// class is high (upstream high_load_thr, 0.75; compared as whole percent).
	HighLoad float64
	// ConnectionActive is the achieved rate (bit/s) above which a direction
	// is "low" rather than "idle", and which wakes a sleeping controller
	// (upstream connection_active_thr_kbps, 2000 kbit/s).
	ConnectionActive int64
	// ConnectionStall: if both achieved rates exceed it (bit/s), missing
	// responses are not a stall (upstream connection_stall_thr_kbps, 10 kbit/s).
	ConnectionStall int64

	// MildestCut is the cut factor at a window average ≤ the delay
	// threshold (upstream shaper_rate_min_adjust_down_bufferbloat, 0.99).
	MildestCut float64
	// StrongestCut is the cut factor at an average ≥ the full-cut
	// threshold (upstream shaper_rate_max_adjust_down_bufferbloat, 0.75).
	StrongestCut float64
	// SmallestIncrease is the high-load factor at an average ≥ the delay
	// threshold (upstream shaper_rate_min_adjust_up_load_high, 1.00).
	SmallestIncrease float64
	// LargestIncrease is the high-load factor at an average ≤ the
	// full-increase threshold (upstream shaper_rate_max_adjust_up_load_high, 1.04).
	LargestIncrease float64
	// DecayFactor moves an above-base rate toward base under low or idle
	// load (upstream shaper_rate_adjust_down_load_low, 0.99).
	DecayFactor float64
	// RecoveryFactor moves a below-base rate toward base under low or idle
	// load (upstream shaper_rate_adjust_up_load_low, 1.01).
	RecoveryFactor float64

	// BufferbloatRefractory is the minimum spacing of cuts; it also blocks
	// increases after a cut (upstream bufferbloat_refractory_period_ms, 300 ms).
	BufferbloatRefractory time.Duration
	// DecayRefractory is the minimum spacing of decay steps, restarted by
	// every cut and increase (upstream decay_refractory_period_ms, 1 s).
	DecayRefractory time.Duration

	// Reflectors is the pool of probe targets; the first Pingers of them
	// (after an optional shuffle) are active, the rest are spares.
	Reflectors []netip.Addr
	// Pingers is the number of simultaneously active reflectors (upstream no_pingers, 6).
	Pingers int
	// PingInterval is the probe interval per reflector (upstream
	// reflector_ping_interval_s, 300 ms); responses arrive every
	// PingInterval/Pingers in aggregate.
	PingInterval time.Duration
	// RandomizeReflectors shuffles the pool at start (upstream randomize_reflectors, on).
	RandomizeReflectors bool
	// RetainReflectorStats keeps the baselines of rotated-out reflectors for
	// reuse (upstream retain_reflector_stats, on).
	RetainReflectorStats bool

	// HealthCheckInterval is the cadence of the reflector health check (1 s).
	HealthCheckInterval time.Duration
	// ResponseDeadline: a slot without a response for longer than this at a
	// health check gets an offence (1 s).
	ResponseDeadline time.Duration
	// MisbehavingWindow is the length of each slot's offence ring (60 checks; at most 1024).
	MisbehavingWindow int
	// MisbehavingOffences in the ring trigger replacement (3).
	MisbehavingOffences int
	// ReplacementInterval: one random active reflector is replaced this often (60 min).
	ReplacementInterval time.Duration
	// ComparisonInterval is the cadence of the cross-reflector comparison (1 min).
	ComparisonInterval time.Duration
	// BaselineSumExcess: replace a slot whose down+up baseline exceeds the
	// best slot's by more than this (20 ms).
	BaselineSumExcess time.Duration
	// DeltaEWMAExcess: replace a slot whose delta EWMA in either direction
	// exceeds the best by more than this (10 ms).
	DeltaEWMAExcess time.Duration

	// AlphaBaselineIncrease is the baseline EWMA weight when a sample is at
	// or above the baseline (0.001): baselines creep up slowly.
	AlphaBaselineIncrease float64
	// AlphaBaselineDecrease is the weight when a sample is below it (0.9).
	AlphaBaselineDecrease float64
	// AlphaDeltaEWMA is the weight of the per-slot delta EWMA used only to
	// rank reflectors (0.095).
	AlphaDeltaEWMA float64

	// SleepEnabled stops probing after SleepAfter of accumulated idle
	// (upstream enable_sleep_function, on).
	SleepEnabled bool
	// SleepAfter is the accumulated idle time before sleeping (60 s).
	SleepAfter time.Duration
	// MinRatesOnSleep sets both rates to their minimum on sleep and on the
	// global ping timeout (upstream min_shaper_rates_enforcement, off).
	MinRatesOnSleep bool
	// StallDetection is the stall timeout in response spacings (5, i.e. 250 ms).
	StallDetection int
	// GlobalPingTimeout: time in STALL after which probes are restarted (10 s).
	GlobalPingTimeout time.Duration
	// StaleResponseAge: a response received longer ago than this when it is
	// processed updates baselines only (500 ms, fixed upstream).
	StaleResponseAge time.Duration

	// MonitorInterval is the byte-counter sampling period (200 ms), floored
	// at 10 × the serialisation time of one packet each way at the base rates.
	MonitorInterval time.Duration

	// MTU of the shaped interface in bytes; 0 disables the serialisation
	// delay compensation (the spec's worked examples use 0).
	MTU int
	// Overhead is the per-packet link-layer overhead in bytes (0-256),
	// added to the MTU for the serialisation delay and compensated in the
	// pipe rate (see "Overhead compensation" in package controller).
	Overhead int
	// MPU is the minimum wire size of a packet in bytes (0 = none).
	MPU int
	// ATM frames packets into 53-byte cells carrying 48 bytes each.
	ATM bool

	// EngageAfter is how long a standing queue must last before balanced
	// mode engages the shaper (4 s).
	EngageAfter time.Duration
	// ReleaseAfter is how long latency must stay clean before balanced mode
	// releases it (20 s).
	ReleaseAfter time.Duration

	// Improvements switches macake's deviations from upstream on; all off
	// in DefaultConfig.
	Improvements Improvements

	// AchievedCut is the share of the achieved rate a CutToAchieved cut
	// goes to (0.8); it only matters with that improvement on.
	AchievedCut float64

	// JitterScale and JitterFloor shape Improvements.JitterThreshold: the
	// thresholds are JitterScale × the delay jitter (relative to the delay
	// threshold), but never below JitterFloor of the configured ones.
	JitterScale, JitterFloor float64
}

// DefaultConfig returns upstream cake-autorate's defaults (autorate.md §3),
// in autorate mode, with every improvement off ("faithful mode"): the
// policy defaults of config.Defaults under upstream's law, mapped by
// FromPolicy, so each default is written once, in config. Rates are
// upstream's example rates (download 5/20/80 Mbit/s, upload 5/20/35
// Mbit/s); a policy always overrides them. MTU is 1500 (a real interface);
// set it to 0 to switch the serialisation-delay compensation off.
func DefaultConfig() Config {
	p := config.DefaultsFor(config.LawUpstream)
	c, err := FromPolicy(p)
	if err != nil {
		panic("controller: config.Defaults does not map: " + err.Error())
	}
	l := config.Link{Policy: p}
	for _, d := range shape.Directions {
		lo, base, hi, err := l.Rates(d, 0, 0, 0)
		if err != nil {
			panic("controller: config.Defaults has no default rates: " + err.Error())
		}
		dc := c.Direction(d)
		dc.Min, dc.Base, dc.Max = int64(lo), int64(base), int64(hi)
	}
	return c
}

// DefaultMTU is used when the interface MTU is unknown (≤ 0).
const DefaultMTU = 1500

// Limits that keep every integer product of the control law inside int64.
const (
	// MaxRate is the highest rate the controller accepts: macake's own
	// bound, 1 Tbit/s.
	MaxRate = shape.MaxRateBits
	// MaxDelay is the largest one-way delay or threshold accepted: 48 h,
	// room for an ICMP-timestamp day rollover (86 400 000 ms) either way.
	MaxDelay          = 48 * time.Hour
	maxWindow         = 64
	maxOffenceWindow  = 1024
	maxOverheadBytes  = 256
	maxMTUBytes       = 65535
	minRateBits       = 1000
	minPositiveFactor = 1e-6
)

// Validate reports every problem in c at once, each naming the field and
// what to do; nil when c can run. The checks follow upstream's start-up
// validation (autorate.md §9), with ranges that keep the arithmetic exact.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.Mode > ModeOff {
		bad("mode %d is not one of autorate, balanced, fixed, off", c.Mode)
	}
	for _, d := range []struct {
		name string
		dc   DirectionConfig
	}{{"download", c.Download}, {"upload", c.Upload}} {
		dc := d.dc
		if dc.Min < minRateBits {
			bad("%s.min %d bit/s is below 1 kbit/s: set a minimum rate of at least 1kbit", d.name, dc.Min)
		}
		if dc.Max > MaxRate {
			bad("%s.max %d bit/s is above 1 Tbit/s", d.name, dc.Max)
		}
		if dc.Base < dc.Min || dc.Base > dc.Max {
			bad("%s: min %d ≤ base %d ≤ max %d bit/s does not hold: order the rates", d.name, dc.Min, dc.Base, dc.Max)
		}
		if dc.Start != 0 && dc.Start < minRateBits {
			bad("%s.start %d bit/s is below 1 kbit/s (use 0 to start at base)", d.name, dc.Start)
		}
		for _, t := range []struct {
			n string
			v time.Duration
		}{{"delay_threshold", dc.DelayThreshold}, {"full_increase_threshold", dc.FullIncreaseThreshold}, {"full_cut_threshold", dc.FullCutThreshold}} {
			if t.v < 0 || t.v > MaxDelay {
				bad("%s.%s %v must be between 0 and %v", d.name, t.n, t.v, MaxDelay)
			}
		}
	}
	if c.BufferbloatWindow < 1 || c.BufferbloatWindow > maxWindow {
		bad("bufferbloat window %d must be between 1 and %d samples", c.BufferbloatWindow, maxWindow)
	}
	if c.BufferbloatVotes < 1 || c.BufferbloatVotes > c.BufferbloatWindow {
		bad("bufferbloat votes %d must be between 1 and the window (%d)", c.BufferbloatVotes, c.BufferbloatWindow)
	}
	if !(c.HighLoad > 0 && c.HighLoad <= 1) {
		bad("high load threshold %v must be a fraction in (0, 1]", c.HighLoad)
	}
	if c.ConnectionActive < 0 || c.ConnectionActive > MaxRate {
		bad("connection active threshold %d bit/s is out of range", c.ConnectionActive)
	}
	if c.ConnectionActive > c.Download.Min || c.ConnectionActive > c.Upload.Min {
		bad("connection active threshold %d bit/s exceeds a minimum rate: lower it or raise the minimums", c.ConnectionActive)
	}
	if c.ConnectionStall < 0 || c.ConnectionStall > MaxRate {
		bad("connection stall threshold %d bit/s is out of range", c.ConnectionStall)
	}
	if !(c.StrongestCut >= minPositiveFactor && c.StrongestCut <= c.MildestCut && c.MildestCut <= 1) {
		bad("cut factors must satisfy 0 < strongest (%v) ≤ mildest (%v) ≤ 1", c.StrongestCut, c.MildestCut)
	}
	if !(c.SmallestIncrease >= 1 && c.SmallestIncrease <= c.LargestIncrease && c.LargestIncrease <= 2) {
		bad("increase factors must satisfy 1 ≤ smallest (%v) ≤ largest (%v) ≤ 2", c.SmallestIncrease, c.LargestIncrease)
	}
	if c.Improvements.JitterThreshold && !(c.JitterScale > 0 && c.JitterScale <= 1000 && c.JitterFloor >= minPositiveFactor && c.JitterFloor <= 1) {
		bad("jitter scale %v must be in (0, 1000] and jitter floor %v in (0, 1] with JitterThreshold", c.JitterScale, c.JitterFloor)
	}
	if c.Improvements.CutToAchieved && !(c.AchievedCut >= minPositiveFactor && c.AchievedCut <= 1) {
		bad("achieved cut %v must be in (0, 1] with CutToAchieved", c.AchievedCut)
	}
	if !(c.DecayFactor > 0 && c.DecayFactor <= 1) {
		bad("decay factor %v must be in (0, 1]", c.DecayFactor)
	}
	if !(c.RecoveryFactor >= 1 && c.RecoveryFactor <= 2) {
		bad("recovery factor %v must be in [1, 2]", c.RecoveryFactor)
	}
	for _, a := range []struct {
		n string
		v float64
	}{{"alpha baseline increase", c.AlphaBaselineIncrease}, {"alpha baseline decrease", c.AlphaBaselineDecrease}, {"alpha delta EWMA", c.AlphaDeltaEWMA}} {
		if !(a.v > 0 && a.v <= 1) {
			bad("%s %v must be in (0, 1]", a.n, a.v)
		}
	}
	for _, d := range []struct {
		n        string
		v        time.Duration
		positive bool
	}{
		{"bufferbloat refractory", c.BufferbloatRefractory, false},
		{"decay refractory", c.DecayRefractory, false},
		{"ping interval", c.PingInterval, true},
		{"health check interval", c.HealthCheckInterval, true},
		{"response deadline", c.ResponseDeadline, true},
		{"replacement interval", c.ReplacementInterval, true},
		{"comparison interval", c.ComparisonInterval, true},
		{"baseline sum excess", c.BaselineSumExcess, false},
		{"delta EWMA excess", c.DeltaEWMAExcess, false},
		{"sleep after", c.SleepAfter, true},
		{"global ping timeout", c.GlobalPingTimeout, true},
		{"stale response age", c.StaleResponseAge, true},
		{"monitor interval", c.MonitorInterval, true},
		{"engage after", c.EngageAfter, false},
		{"release after", c.ReleaseAfter, false},
	} {
		if d.v < 0 || (d.positive && d.v < time.Microsecond) || d.v > 1000*time.Hour {
			bad("%s %v must be %s and at most 1000h", d.n, d.v, map[bool]string{true: "at least 1µs", false: "≥ 0"}[d.positive])
		}
	}
	if c.Pingers < 1 || c.Pingers > len(c.Reflectors) {
		bad("pingers %d must be between 1 and the number of reflectors (%d): add reflectors or lower pingers", c.Pingers, len(c.Reflectors))
	}
	if c.Pingers >= 1 && c.PingInterval/time.Duration(c.Pingers) < time.Millisecond {
		bad("ping interval %v over %d pingers is under 1ms between responses: lengthen the interval", c.PingInterval, c.Pingers)
	}
	seen := make(map[netip.Addr]bool, len(c.Reflectors))
	for i, r := range c.Reflectors {
		if !r.IsValid() {
			bad("reflector %d is not a valid IP address", i+1)
			continue
		}
		r = r.Unmap()
		if seen[r] {
			bad("reflector %s is listed twice: reflectors must be unique", r)
		}
		seen[r] = true
	}
	if c.MisbehavingWindow < 1 || c.MisbehavingWindow > maxOffenceWindow {
		bad("misbehaving window %d must be between 1 and %d checks", c.MisbehavingWindow, maxOffenceWindow)
	}
	if c.MisbehavingOffences < 1 || c.MisbehavingOffences > c.MisbehavingWindow {
		bad("misbehaving offences %d must be between 1 and the window (%d)", c.MisbehavingOffences, c.MisbehavingWindow)
	}
	if c.StallDetection < 1 || c.StallDetection > 1000 {
		bad("stall detection %d must be between 1 and 1000 response spacings", c.StallDetection)
	}
	if c.MTU < 0 || c.MTU > maxMTUBytes {
		bad("MTU %d must be between 0 and %d bytes", c.MTU, maxMTUBytes)
	}
	if c.Overhead < 0 || c.Overhead > maxOverheadBytes {
		bad("overhead %d must be between 0 and %d bytes", c.Overhead, maxOverheadBytes)
	}
	if c.MPU < 0 || c.MPU > maxMTUBytes {
		bad("mpu %d must be between 0 and %d bytes", c.MPU, maxMTUBytes)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("controller config: %w", errors.Join(errs...))
}
