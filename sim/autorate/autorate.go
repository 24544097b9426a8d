// SPDX-License-Identifier: Apache-2.0

// Package autorate runs macake's production controller (package
// controller) inside the simulator: `upstream` is the faithful port with
// cake-autorate's defaults, `ours` the same controller with macake's
// improvements switched on. The adapter gives the controller exactly what
// the daemon would: reflector replies as echo RTTs (or ICMP-timestamp
// one-way delays), interface byte and packet counters, and ticks; its
// decisions go to the simulated dnctl.
package autorate

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
)

// Epoch is the wall-clock time of simulated time 0: the start of a
// minute, so that Starlink's reconfigurations at seconds 12, 27, 42 and 57
// fall where the link models put them.
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// UpstreamConfig is cake-autorate's configuration for a simulated link:
// tuning.DefaultConfig (upstream's defaults.sh, every improvement off)
// with min/base/max from the link (benchmark.md §6.2: p5/p25/p95 of the
// trace, or a policy's bounds).
func UpstreamConfig(env *sim.Env) tuning.Config {
	return lawConfig(config.LawUpstream, env)
}

// OursConfig is macake's law as `macake watch` runs it for a policy that
// sets no [autorate] tunable (config.Defaults: the law's improvements and
// tuned defaults), with the link's min/base/max.
func OursConfig(env *sim.Env) tuning.Config {
	return lawConfig(config.LawMacake, env)
}

// lawConfig is the controller of a policy under law with every default,
// bounded as the link says.
func lawConfig(law config.ControlLaw, env *sim.Env) tuning.Config {
	cfg, err := tuning.FromPolicy(config.DefaultsFor(law))
	if err != nil {
		panic("autorate: the default policy does not map: " + err.Error())
	}
	set := func(dc *tuning.DirectionConfig, b sim.Bounds) {
		dc.Min, dc.Base, dc.Max = b.Min, b.Base, b.Max
	}
	set(&cfg.Download, env.Bounds[shape.Download])
	set(&cfg.Upload, env.Bounds[shape.Upload])
	// Upstream refuses an activity threshold above either minimum rate
	// (autorate.md §9); traces whose p5 is below 2 Mbit/s need it lowered,
	// as a user of such a link would have to.
	cfg.ConnectionActive = min(cfg.ConnectionActive, cfg.Download.Min, cfg.Upload.Min)
	return cfg
}

// OursImprovements are the switches `ours` turns on: exactly the daemon's
// default control law (tuning.MacakeImprovements), so the simulator
// measures what users run.
var OursImprovements = tuning.MacakeImprovements()

// Factory runs the production controller with the configuration build
// returns for each run.
func Factory(build func(env *sim.Env) tuning.Config) sim.Factory {
	return func(env *sim.Env) (sim.Controller, error) {
		cfg := build(env)
		rng := rand.New(rand.NewPCG(env.Seed, 0x6175746f72617465))
		c, err := controller.New(cfg, rng)
		if err != nil {
			return nil, err
		}
		return &adapter{c: c, mode: cfg.Mode}, nil
	}
}

// ConfigFactory runs the production controller with one fixed
// configuration, whatever the link: what `macake watch` builds from a
// policy (desired.ControllerConfig). Its mode is honoured as the daemon
// honours it: autorate steers the pipes; fixed installs them at the base
// rates and only observes; off installs nothing; balanced installs them
// when the controller engages and removes them when it releases.
func ConfigFactory(cfg tuning.Config) sim.Factory {
	return func(env *sim.Env) (sim.Controller, error) {
		rng := rand.New(rand.NewPCG(env.Seed, 0x6175746f72617465))
		c, err := controller.New(cfg, rng)
		if err != nil {
			return nil, err
		}
		return &adapter{c: c, mode: cfg.Mode}, nil
	}
}

// Arms returns the two autorate arms by name.
func Arms() map[string]sim.Factory {
	return map[string]sim.Factory{
		"upstream": Factory(UpstreamConfig),
		"ours":     Factory(OursConfig),
	}
}

// Variant parses "upstream+A+B", "ours-A" or "ours+A@F=v" into a
// factory: the named arm with improvement switches A, B (field names of
// tuning.Improvements) turned on (+) or off (−), and configuration
// fields set (Set). It is how a single change is measured against the
// faithful port.
func Variant(name string) (sim.Factory, error) {
	t, err := ParseTweak(name)
	if err != nil {
		return nil, err
	}
	build := map[string]func(*sim.Env) tuning.Config{"upstream": UpstreamConfig, "ours": OursConfig}[t.Arm]
	return Factory(func(env *sim.Env) tuning.Config {
		cfg := build(env)
		t.Apply(&cfg) // checked by ParseTweak
		return cfg
	}), nil
}

// Tweak is a variant's name taken apart: the arm it starts from (upstream
// or ours), the improvement switches it changes ("+A-B") and the
// configuration fields it sets ("F=v@G=w").
type Tweak struct {
	Arm, Switches, Settings string
}

// ParseTweak takes a variant's name apart and checks its switches and
// settings.
func ParseTweak(name string) (Tweak, error) {
	rest, settings, _ := strings.Cut(name, "@")
	i := strings.IndexAny(rest, "+-")
	if i < 0 {
		i = len(rest)
	}
	t := Tweak{Arm: rest[:i], Switches: rest[i:], Settings: settings}
	if t.Arm != "upstream" && t.Arm != "ours" {
		return Tweak{}, fmt.Errorf("variant %q: want it to start with upstream or ours", name)
	}
	if t.Switches == "" && t.Settings == "" {
		return Tweak{}, fmt.Errorf("%q is not a variant (want upstream+Switch, ours-Switch or ours@Field=value)", name)
	}
	probe := tuning.DefaultConfig()
	if err := t.Apply(&probe); err != nil {
		return Tweak{}, fmt.Errorf("variant %q: %w", name, err)
	}
	return t, nil
}

// Apply makes the tweak's changes to cfg.
func (t Tweak) Apply(cfg *tuning.Config) error {
	if err := Switch(&cfg.Improvements, t.Switches); err != nil {
		return err
	}
	return Set(cfg, t.Settings)
}

// Set applies settings such as "AchievedCut=0.8@Dir.DelayThreshold=20ms"
// to cfg: each names a field of tuning.Config (a float, an integer,
// a duration or a bool; "Dir.F" sets F of both directions).
func Set(cfg *tuning.Config, settings string) error {
	if settings == "" {
		return nil
	}
	for _, kv := range strings.Split(settings, "@") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("setting %q: want Field=value", kv)
		}
		paths := []string{k}
		if f, ok := strings.CutPrefix(k, "Dir."); ok {
			paths = []string{"Download." + f, "Upload." + f}
		}
		for _, p := range paths {
			f := reflect.ValueOf(cfg).Elem()
			for _, part := range strings.Split(p, ".") {
				if f.Kind() != reflect.Struct {
					return fmt.Errorf("setting %q: %s is not a field of the controller's configuration", kv, p)
				}
				f = f.FieldByName(part)
				if !f.IsValid() {
					return fmt.Errorf("setting %q: %s is not a field of the controller's configuration", kv, p)
				}
			}
			switch {
			case f.Type() == reflect.TypeOf(time.Duration(0)):
				d, err := time.ParseDuration(v)
				if err != nil {
					return fmt.Errorf("setting %q: %w", kv, err)
				}
				f.SetInt(int64(d))
			case f.Kind() == reflect.Float64:
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("setting %q: %w", kv, err)
				}
				f.SetFloat(x)
			case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
				x, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("setting %q: %w", kv, err)
				}
				f.SetInt(x)
			case f.Kind() == reflect.Bool:
				x, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("setting %q: %w", kv, err)
				}
				f.SetBool(x)
			default:
				return fmt.Errorf("setting %q: %s cannot be set from the command line", kv, p)
			}
		}
	}
	return nil
}

// Switch applies changes such as "+A-B" to imp: switch A (a field name
// of tuning.Improvements) on, B off.
func Switch(imp *tuning.Improvements, changes string) error {
	v := reflect.ValueOf(imp).Elem()
	for rest := changes; rest != ""; {
		on := rest[0] == '+'
		if !on && rest[0] != '-' {
			return fmt.Errorf("%q: want +Switch or -Switch", changes)
		}
		rest = rest[1:]
		j := strings.IndexAny(rest, "+-")
		if j < 0 {
			j = len(rest)
		}
		field := rest[:j]
		rest = rest[j:]
		f := v.FieldByName(field)
		if !f.IsValid() || f.Kind() != reflect.Bool {
			return fmt.Errorf("no improvement switch %q; switches: %s", field, strings.Join(Switches(), ", "))
		}
		f.SetBool(on)
	}
	return nil
}

// Switches lists the improvement switches of the controller.
func Switches() []string {
	t := reflect.TypeOf(tuning.Improvements{})
	var out []string
	for i := range t.NumField() {
		if t.Field(i).Type.Kind() == reflect.Bool {
			out = append(out, t.Field(i).Name)
		}
	}
	return out
}

// adapter is the daemon's side of the loop, in the simulator.
type adapter struct {
	c    *controller.Controller
	act  sim.Actuator
	refl []netip.Addr
	// mode is the controller's mode; engaged tracks balanced mode's
	// shaper as the daemon's ShaperSwitch does.
	mode    tuning.Mode
	engaged bool
}

func at(t time.Duration) time.Time { return Epoch.Add(t) }

func (a *adapter) Start(now time.Duration, act sim.Actuator) {
	a.act = act
	out := a.c.Start(at(now))
	if a.mode == tuning.ModeFixed {
		// `macake apply` installs the pipes at the base rates; the
		// controller never changes them.
		st := a.c.State()
		for _, d := range shape.Directions {
			a.act.SetRate(d, st.Direction(d).PipeRate)
		}
	}
	a.do(&out)
}

// Delay maps the simulator's reflector slot to the address the controller
// has in that slot now (the daemon probes the controller's active
// reflectors) and hands over the reply.
func (a *adapter) Delay(s sim.DelaySample) {
	a.refl = a.c.ActiveReflectors(a.refl[:0])
	if s.Reflector < 0 || s.Reflector >= len(a.refl) {
		return
	}
	addr := a.refl[s.Reflector]
	ds := controller.RTTSample(addr, at(s.At), s.RTT)
	if s.HasOWD {
		ds = controller.DelaySample{Reflector: addr, At: at(s.At), DownOWD: s.DownOWD, UpOWD: s.UpOWD, Method: controller.ICMPTimestamp}
	}
	out := a.c.Delay(at(s.At), ds)
	a.do(&out)
}

func (a *adapter) Load(s sim.LoadSample) {
	out := a.c.Load(at(s.At), controller.LoadSample{
		At: at(s.At), RxBytes: s.RxBytes, TxBytes: s.TxBytes, RxPackets: s.RxPackets, TxPackets: s.TxPackets,
	})
	a.do(&out)
}

func (a *adapter) Tick(now time.Duration) {
	out := a.c.Tick(at(now))
	a.do(&out)
}

// do applies the decisions; the simulated dnctl never fails.
func (a *adapter) do(out *controller.Output) {
	if a.mode == tuning.ModeBalanced {
		if now := a.c.Engaged(); now != a.engaged {
			a.engaged = now
			if !now { // release: the daemon removes the pipes
				for _, d := range shape.Directions {
					a.act.SetRate(d, 0)
				}
			}
		}
	}
	for _, d := range out.Decisions() {
		a.act.SetRate(d.Direction, d.Rate)
		a.c.ReportApply(d.Direction, nil)
	}
}

// ProbesPaused is true while the controller sleeps: the daemon stops probing.
func (a *adapter) ProbesPaused() bool { return a.c.ProbingPaused() }

// MonitorInterval is the counter period the controller asks for.
func (a *adapter) MonitorInterval() time.Duration { return a.c.MonitorInterval() }
