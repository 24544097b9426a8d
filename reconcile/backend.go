// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/execrun"
)

// EnvBackend names the environment variable that picks a backend by name
// ("pf" or "tc"), overriding the choice by operating system.
const EnvBackend = "MACAKE_BACKEND"

// BackendConfig is what a backend constructor needs.
type BackendConfig struct {
	// Settings are the daemon settings: the pf anchor and the pipe range.
	Settings config.Daemon
	// Tokens keeps the pf backend's enable token (StateTokens in
	// production: the state file).
	Tokens pfdn.TokenStore
	// Runner runs the backend's commands. nil means real processes
	// (execrun.Exec), after checking that the tools exist; tests pass the
	// in-process emulator.
	Runner execrun.Runner
	// Getenv reads the environment (tool path overrides); nil is os.Getenv.
	Getenv func(string) string
	// KnownLinks returns every link name that holds a slot in the state
	// file, including links removed from the config since; plans use it to
	// name the leftovers of removed links. nil uses Tokens' Slots when
	// Tokens is the state file (StateTokens).
	KnownLinks func() map[string]int
	// GOOS picks the default backend; "" is runtime.GOOS.
	GOOS string
	// Ownership is the tc backend's record of the root qdiscs it created
	// (tc.Ownership). nil uses Tokens when it keeps one (StateTokens: the
	// state file), else a record in memory. A read-only inspection
	// (doctor) passes a tc.MemoryOwnership seeded from the state file.
	Ownership tc.Ownership
}

func (c BackendConfig) getenv(k string) string {
	if c.Getenv == nil {
		return os.Getenv(k)
	}
	return c.Getenv(k)
}

// backendConstructors is the backend table. Adding a backend is one line
// here (and its constructor).
var backendConstructors = map[string]func(BackendConfig) (backend.Backend, error){
	"pf": openPF,
	"tc": openTC,
}

// knownBackends are the names MACAKE_BACKEND accepts, built or not.
var knownBackends = []string{"pf", "tc"}

// ChooseBackend returns the name of the backend for this machine:
// MACAKE_BACKEND when set; "pf" on macOS; on Linux "pf" when MACAKE_PFCTL
// or MACAKE_DNCTL is set (the emulator), else "tc".
func ChooseBackend(goos string, getenv func(string) string) (string, error) {
	if name := getenv(EnvBackend); name != "" {
		for _, k := range knownBackends {
			if name == k {
				return name, nil
			}
		}
		return "", fmt.Errorf("%s=%q: unknown backend; use one of %s", EnvBackend, name, strings.Join(knownBackends, ", "))
	}
	switch goos {
	case "darwin":
		return "pf", nil
	case "linux":
		if getenv(pfdn.EnvPfctl) != "" || getenv(pfdn.EnvDnctl) != "" {
			return "pf", nil
		}
		return "tc", nil
	}
	return "", fmt.Errorf("%w: macake shapes on macOS (pf + dummynet) and Linux (tc), not on %s", backend.ErrUnavailable, goos)
}

// OpenBackend chooses and opens the backend for this machine. Its errors
// match backend.ErrUnavailable when this machine cannot shape.
func OpenBackend(cfg BackendConfig) (backend.Backend, error) {
	goos := cfg.GOOS
	if goos == "" {
		goos = runtime.GOOS
	}
	name, err := ChooseBackend(goos, cfg.getenv)
	if err != nil {
		return nil, err
	}
	open, ok := backendConstructors[name]
	if !ok {
		return nil, fmt.Errorf("%w: backend %q is not built into this macake (built: %s)", backend.ErrUnavailable, name, strings.Join(builtBackends(), ", "))
	}
	return open(cfg)
}

func builtBackends() []string {
	names := make([]string, 0, len(backendConstructors))
	for n := range backendConstructors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PFOptions returns the pfdn options for the daemon settings: the anchor
// and pipe range from settings (defaults where unset), the tool paths from
// MACAKE_PFCTL/MACAKE_DNCTL when set.
func PFOptions(settings config.Daemon, getenv func(string) string) pfdn.Options {
	o := pfdn.DefaultOptions().WithEnv(getenv)
	if settings.Anchor != "" {
		o.Anchor = settings.Anchor
	}
	if r := settings.PipeRange; r.First != 0 || r.Last != 0 {
		o.Pipes = pfdn.PipeRange{First: r.First, Last: r.Last}
	}
	return o
}

func openPF(cfg BackendConfig) (backend.Backend, error) {
	opts := PFOptions(cfg.Settings, cfg.getenv)
	opts.KnownLinks = cfg.KnownLinks
	if st, ok := cfg.Tokens.(*StateTokens); ok && opts.KnownLinks == nil {
		opts.KnownLinks = st.Slots
	}
	run := cfg.Runner
	if run == nil {
		for _, tool := range []struct{ name, path, env string }{{"pfctl", opts.Pfctl, pfdn.EnvPfctl}, {"dnctl", opts.Dnctl, pfdn.EnvDnctl}} {
			if err := checkTool(tool.path); err != nil {
				return nil, fmt.Errorf("%w: %s: %v (macake needs macOS's %s; %s overrides the path)", backend.ErrUnavailable, tool.name, err, tool.name, tool.env)
			}
		}
		run = execrun.Exec{Timeout: opts.CommandTimeout}
	}
	tokens := cfg.Tokens
	if tokens == nil {
		tokens = &pfdn.MemoryTokens{}
	}
	b, err := pfdn.New(run, tokens, opts)
	if err != nil {
		return nil, err // not a nil *pfdn.Backend in a non-nil interface
	}
	return b, nil
}

// The environment variables that override the tc backend's tool paths
// (tc.DefaultTools reads the same names).
const (
	EnvTC      = "MACAKE_TC"
	EnvIP      = "MACAKE_IP"
	EnvUnshare = "MACAKE_UNSHARE"
	// EnvNetlink = "off" makes the tc backend run `tc` for every rate
	// change instead of writing it over netlink (a kernel or sandbox
	// that refuses rtnetlink; the benchmark's process-per-change model).
	EnvNetlink = "MACAKE_NETLINK"
)

// TCTools returns the tc backend's tools: tc.DefaultTools, with the paths
// MACAKE_TC, MACAKE_IP and MACAKE_UNSHARE give through getenv.
func TCTools(getenv func(string) string) tc.Tools {
	t := tc.DefaultTools()
	for _, o := range []struct {
		env string
		dst *string
	}{{EnvTC, &t.TC}, {EnvIP, &t.IP}, {EnvUnshare, &t.Unshare}} {
		if v := getenv(o.env); v != "" {
			*o.dst = v
		}
	}
	return t
}

// tcTimeout bounds one tc or ip child. They answer in milliseconds; the
// capability probe creates a network namespace, which takes longer on a
// busy machine.
const tcTimeout = 10 * time.Second

func openTC(cfg BackendConfig) (backend.Backend, error) {
	tools := TCTools(cfg.getenv)
	run := cfg.Runner
	if run == nil {
		for _, tool := range []struct{ name, path, env string }{{"tc", tools.TC, EnvTC}, {"ip", tools.IP, EnvIP}} {
			if err := checkToolOnPath(tool.path); err != nil {
				return nil, fmt.Errorf("%w: %s: %v (macake needs iproute2's %s on Linux: apt-get install iproute2; %s overrides the path)",
					backend.ErrUnavailable, tool.name, err, tool.name, tool.env)
			}
		}
		run = execrun.Exec{Timeout: tcTimeout}
	}
	b := &tc.Backend{Runner: run, Tools: tools, Owners: cfg.Ownership}
	if cfg.Runner == nil && tc.NetlinkAvailable && cfg.getenv(EnvNetlink) != "off" {
		// Rate changes go over netlink: no process per change.
		b.Netlink = tc.NewNetlink(tools.Netns)
	}
	if o, ok := cfg.Tokens.(tc.Ownership); ok && b.Owners == nil {
		b.Owners = o
	}
	return b, nil
}

// checkToolOnPath is checkTool for a path that may be a bare name, which
// tc.DefaultTools returns when the tool is in none of the usual
// directories: the child is then found on PATH, so look there.
func checkToolOnPath(path string) error {
	if strings.Contains(path, "/") {
		return checkTool(path)
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir != "" && checkTool(filepath.Join(dir, path)) == nil {
			return nil
		}
	}
	return fmt.Errorf("%s is not in /usr/sbin, /sbin, /usr/bin, /bin or PATH", path)
}

// checkTool reports why path cannot be run, or nil.
func checkTool(path string) error {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", path)
	case err != nil:
		return err
	case info.IsDir() || info.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
