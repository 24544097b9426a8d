// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"fmt"

	"github.com/macake/macake/backend"
)

func init() {
	backend.Register(backend.Registration{
		Name: "pf", Target: "darwin", Limits: Limits, Claims: claims, Open: open,
	})
}

// claims: pf + dummynet is macOS's shaper; on Linux it is chosen when
// MACAKE_PFCTL or MACAKE_DNCTL points at the emulator.
func claims(goos string, getenv func(string) string) backend.Claim {
	switch {
	case goos == "darwin":
		return backend.ClaimSystem
	case goos == "linux" && (getenv(EnvPfctl) != "" || getenv(EnvDnctl) != ""):
		return backend.ClaimEnvironment
	}
	return backend.NoClaim
}

// OptionsFor returns the options for the daemon settings: the anchor and
// pipe range from settings (defaults where unset), the tool paths from
// MACAKE_PFCTL/MACAKE_DNCTL when set.
func OptionsFor(settings backend.Settings, getenv func(string) string) Options {
	o := DefaultOptions().WithEnv(getenv)
	if settings.Anchor != "" {
		o.Anchor = settings.Anchor
	}
	if settings.PipeFirst != 0 || settings.PipeLast != 0 {
		o.Pipes = PipeRange{First: settings.PipeFirst, Last: settings.PipeLast}
	}
	return o
}

// open is the pf backend's opener: pfctl and dnctl must be there unless
// cfg brings a Runner (the emulator in process).
func open(cfg backend.Config) (backend.Backend, error) {
	opts := OptionsFor(cfg.Settings, cfg.Env)
	var tokens TokenStore = &MemoryTokens{}
	if cfg.Store != nil {
		tokens, opts.KnownLinks = cfg.Store, cfg.Store.Slots
	}
	run, err := backend.ToolRunner(cfg, opts.CommandTimeout, []backend.Tool{
		{Name: "pfctl", Path: opts.Pfctl, Hint: fmt.Sprintf("macake needs macOS's pfctl; %s overrides the path", EnvPfctl)},
		{Name: "dnctl", Path: opts.Dnctl, Hint: fmt.Sprintf("macake needs macOS's dnctl; %s overrides the path", EnvDnctl)},
	})
	if err != nil {
		return nil, err
	}
	b, err := New(run, tokens, opts)
	if err != nil {
		return nil, err // not a nil *Backend in a non-nil interface
	}
	return b, nil
}
