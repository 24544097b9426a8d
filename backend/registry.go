// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// EnvBackend names the environment variable that picks a backend by name
// ("pf" or "tc"), overriding the choice by operating system.
const EnvBackend = "MACAKE_BACKEND"

// Names are the backend names MACAKE_BACKEND accepts, registered in this
// binary or not, so that a build without one says "not built" rather than
// "unknown".
var Names = []string{"pf", "tc"}

// Settings are the daemon settings a backend reads (macake.toml's anchor
// and pipe range); the zero value takes the backend's defaults.
type Settings struct {
	// Anchor is the pf anchor macake owns ("" for the default).
	Anchor string
	// PipeFirst and PipeLast bound the dummynet pipe numbers macake owns
	// (both 0 for the default range).
	PipeFirst, PipeLast int
}

// Config is what opening a backend takes.
type Config struct {
	// Settings are the daemon settings.
	Settings Settings
	// Store keeps what the backend records in the state file (the pf
	// enable token, the tc roots macake created, the slot of every link
	// macake knows). nil keeps them in memory (tests, one-shot checks).
	Store Store
	// Runner runs the backend's commands. nil means real processes
	// (execrun.Exec), after checking that the tools exist; tests pass the
	// in-process emulator.
	Runner execrun.Runner
	// Getenv reads the environment (tool path overrides); nil is os.Getenv.
	Getenv func(string) string
	// GOOS picks the backend; "" is runtime.GOOS.
	GOOS string
}

// Env reads the environment variable k through Getenv.
func (c Config) Env(k string) string {
	if c.Getenv == nil {
		return os.Getenv(k)
	}
	return c.Getenv(k)
}

// Claim is how strongly a backend claims a machine (Registration.Claims):
// the highest claim is chosen.
type Claim int

// The claims, weakest first.
const (
	// NoClaim: the backend does not shape this system.
	NoClaim Claim = iota
	// ClaimSystem: the backend is this operating system's.
	ClaimSystem
	// ClaimEnvironment: the environment asks for this backend (pf on
	// Linux when MACAKE_PFCTL points at the emulator).
	ClaimEnvironment
)

// Registration is one backend in the table: the facts known without
// opening it, and its opener. A backend package registers itself from an
// init function; cmd/macake imports the backends to link them in.
type Registration struct {
	// Name is the table key (Info.Name), one of Names.
	Name string
	// Target is the operating system whose policies the backend shapes
	// ("darwin", "linux"): what policies are checked against once it is
	// chosen.
	Target string
	// Limits are the largest rate and queue its shaper takes
	// (Info.Limits).
	Limits shape.Limits
	// Claims says how strongly the backend claims a machine running goos
	// with this environment.
	Claims func(goos string, getenv func(string) string) Claim
	// Open opens it.
	Open func(Config) (Backend, error)
}

var registry struct {
	sync.Mutex
	byName map[string]Registration
}

// Register adds a backend to the table; a second registration of a name
// panics (two backends would then answer to it).
func Register(r Registration) {
	registry.Lock()
	defer registry.Unlock()
	if registry.byName == nil {
		registry.byName = map[string]Registration{}
	}
	if _, dup := registry.byName[r.Name]; dup {
		panic("backend: " + r.Name + " registered twice")
	}
	if !slices.Contains(Names, r.Name) {
		panic("backend: " + r.Name + " is not one of backend.Names")
	}
	registry.byName[r.Name] = r
}

// Lookup returns the registration of the named backend.
func Lookup(name string) (Registration, bool) {
	registry.Lock()
	defer registry.Unlock()
	r, ok := registry.byName[name]
	return r, ok
}

// ForTarget returns the registration of the backend that shapes target's
// policies ("darwin", "linux").
func ForTarget(target string) (Registration, bool) {
	for _, r := range registered() {
		if r.Target == target {
			return r, true
		}
	}
	return Registration{}, false
}

func registered() []Registration {
	registry.Lock()
	defer registry.Unlock()
	out := make([]Registration, 0, len(registry.byName))
	for _, r := range registry.byName {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Registration) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func registeredNames() []string {
	var names []string
	for _, r := range registered() {
		names = append(names, r.Name)
	}
	return names
}

// Choose returns the name of the backend for a machine running goos:
// MACAKE_BACKEND when set; else the registered backend that claims the
// machine most strongly (pf on macOS, and on Linux when MACAKE_PFCTL or
// MACAKE_DNCTL points at the emulator; tc on Linux).
func Choose(goos string, getenv func(string) string) (string, error) {
	if name := getenv(EnvBackend); name != "" {
		if slices.Contains(Names, name) {
			return name, nil
		}
		return "", fmt.Errorf("%s=%q: unknown backend; use one of %s", EnvBackend, name, strings.Join(Names, ", "))
	}
	best, claim := "", NoClaim
	for _, r := range registered() {
		if c := r.Claims(goos, getenv); c > claim {
			best, claim = r.Name, c
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: macake shapes on macOS (pf + dummynet) and Linux (tc), not on %s", ErrUnavailable, goos)
	}
	return best, nil
}

// Open chooses and opens the backend for this machine. Its errors match
// ErrUnavailable when this machine cannot shape.
func Open(cfg Config) (Backend, error) {
	goos := cmp.Or(cfg.GOOS, runtime.GOOS)
	name, err := Choose(goos, cfg.Env)
	if err != nil {
		return nil, err
	}
	r, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: backend %q is not built into this macake (built: %s)", ErrUnavailable, name, strings.Join(registeredNames(), ", "))
	}
	return r.Open(cfg)
}

// CheckTool reports why the tool at path cannot be run, or nil. A bare
// name (no slash) is looked for on PATH, where the child would be found.
func CheckTool(path string) error {
	if !strings.Contains(path, "/") {
		for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
			if dir != "" && checkFile(filepath.Join(dir, path)) == nil {
				return nil
			}
		}
		return fmt.Errorf("%s is not in /usr/sbin, /sbin, /usr/bin, /bin or PATH", path)
	}
	return checkFile(path)
}

func checkFile(path string) error {
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

// ToolRunner is the Runner a backend opened with cfg uses: cfg.Runner, or
// real processes bounded by timeout once every tool in tools (name → path)
// is found runnable. missing formats the error of a tool that is not.
func ToolRunner(cfg Config, timeout time.Duration, tools []Tool) (execrun.Runner, error) {
	if cfg.Runner != nil {
		return cfg.Runner, nil
	}
	for _, t := range tools {
		if err := CheckTool(t.Path); err != nil {
			return nil, fmt.Errorf("%w: %s: %v (%s)", ErrUnavailable, t.Name, err, t.Hint)
		}
	}
	return execrun.Exec{Timeout: timeout}, nil
}

// Tool is one program a backend runs, for ToolRunner's check.
type Tool struct {
	// Name is what the tool is called ("pfctl"), Path where it is run
	// from, and Hint what to do when it is missing.
	Name, Path, Hint string
}
