// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// Backend turns a backend-neutral desired state into the system's own
// objects: pf + dummynet on macOS (pfdn), tc on Linux.
type Backend interface {
	// Plan observes the live system and returns the ordered ops that make
	// it match desired (only owned objects; foreign ones never appear as
	// "to remove"). It never changes the system. It may return a plan
	// together with an error that forbids applying it (pfdn: a missing
	// hook line).
	Plan(ctx context.Context, desired shape.State) (plan.Plan, error)
	// Execute runs one op's commands; it may be called again after a
	// failure.
	Execute(ctx context.Context, op plan.Op) error
	// SetRate is the controller's hot path: one command updating one
	// direction of one link.
	SetRate(ctx context.Context, link shape.Link, dir shape.Direction, p shape.Pipe) error
	// Teardown removes everything the backend owns and releases what it
	// holds (pfdn: the pf enable reference); idempotent and safe after a
	// crash. It returns the plan it executed.
	Teardown(ctx context.Context) (plan.Plan, error)
}

var (
	_ Backend = (*pfdn.Backend)(nil)
	_ Backend = (*tc.Backend)(nil)
)

// TokenStore keeps a backend's system reference between runs (pfdn: the pf
// enable token). It has pfdn.TokenStore's method set; StateTokens
// implements it on the state file.
type TokenStore interface {
	PFToken() string
	SetPFToken(token string) error
}

// EnvBackend names the environment variable that picks a backend by name
// ("pf" or "tc"), overriding the choice by operating system.
const EnvBackend = "MACAKE_BACKEND"

// ErrUnavailable is matched (errors.Is) by errors that mean the machine
// cannot shape: no backend for this system, or its tools are missing.
// Unavailable also recognises the backends' own such errors.
var ErrUnavailable = errors.New("shaping backend unavailable")

// Unavailable reports whether err means that shaping is impossible here
// (tools missing or not usable, e.g. without root): exit status 69.
func Unavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, pfdn.ErrUnavailable)
}

// BackendConfig is what a backend constructor needs.
type BackendConfig struct {
	// Settings are the daemon settings: the pf anchor and the pipe range.
	Settings config.Daemon
	// Tokens keeps the backend's system reference (StateTokens in
	// production).
	Tokens TokenStore
	// Runner runs the backend's commands. nil means real processes
	// (execrun.Exec), after checking that the tools exist; tests pass the
	// in-process emulator.
	Runner execrun.Runner
	// Getenv reads the environment (tool path overrides); nil is os.Getenv.
	Getenv func(string) string
	// KnownLinks, when set, returns every link name that holds a slot in
	// the state file (StateTokens.Slots), including links removed from the
	// config since; plans use it to name the leftovers of removed links.
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

// OpenedBackend is a ready backend and how to describe it to people.
type OpenedBackend struct {
	Backend
	// Name is the table key: "pf" or "tc".
	Name string
	// Scope names what the backend owns, for the progress line "Reading
	// live state (SCOPE) … ok", e.g. `pf anchor "com.apple/macake",
	// dummynet pipes 48001-48998`.
	Scope string
	// System names the live state in "No changes. Live SYSTEM state
	// matches DIR.", e.g. "pf/dummynet".
	System string
	// SharedGroup titles the plan block of ops that belong to no single
	// link (plan.TextOptions.SharedGroup), e.g. "pf".
	SharedGroup string
	// MaxSlots is how many links it can shape at once (Inputs.MaxSlots).
	MaxSlots int
	// LiveSlots reads how the live system uses the slots: which slot each
	// interface's live shaping uses (Inputs.LiveSlots), for rebuilding a
	// lost state file, and which slots hold objects that are not provably
	// macake's (Inputs.ForeignSlots), which no new link may take. nil when
	// the backend cannot tell.
	LiveSlots func(ctx context.Context) (SlotUse, error)
	// KernelOverhead is true when the backend's shaper adds each packet's
	// overhead and mpu itself (tc: htb and cake take them as options), so
	// its rates are wire rates (Inputs.KernelOverhead), and false when the
	// shaper counts packet bytes only (dummynet), so the rate it gets is
	// lowered to make up for the overhead (PipeRate).
	KernelOverhead bool
	// ShaperName names the object that shapes one direction of a link, for
	// status, e.g. "pipe 48001"; nil when the backend has no short name.
	ShaperName func(l shape.Link, d shape.Direction) string
	// LiveShapers reads the shapers macake owns as they are live, for a
	// status without a daemon; nil when the backend cannot list them.
	LiveShapers func(ctx context.Context) ([]LiveShaper, error)
	// PlanUnread is the plan against a system where macake owns nothing,
	// made without reading the live state, for a dry run that may not
	// read it (pf: without root); nil when reading needs no privilege.
	PlanUnread func(desired shape.State) (plan.Plan, error)
}

// SlotUse is what the live system says about slots (OpenedBackend.LiveSlots).
type SlotUse struct {
	// Interfaces maps an interface to the slot macake's live shaping on it
	// uses.
	Interfaces map[string]int
	// Foreign are the slots whose objects exist but that nothing of
	// macake's accounts for besides the state file (pf: a pipe in the range
	// that no rule in macake's anchor names). Desired skips those the state
	// file does not hold either.
	Foreign map[int]bool
}

// LiveShaper is one shaper macake owns, as read from the system.
type LiveShaper struct {
	// Name is e.g. "pipe 48001"; Interface and Direction come from the
	// rule that sends traffic to it ("" when no rule does).
	Name       string
	Interface  string
	Direction  string
	RateBits   int64
	QueueBytes int64
}

// backendConstructors is the backend table. Adding a backend is one line
// here (and its constructor).
var backendConstructors = map[string]func(BackendConfig) (*OpenedBackend, error){
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
	return "", fmt.Errorf("%w: macake shapes on macOS (pf + dummynet) and Linux (tc), not on %s", ErrUnavailable, goos)
}

// OpenBackend chooses and opens the backend for this machine. Its errors
// match ErrUnavailable when this machine cannot shape.
func OpenBackend(cfg BackendConfig) (*OpenedBackend, error) {
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
		return nil, fmt.Errorf("%w: backend %q is not built into this macake (built: %s)", ErrUnavailable, name, strings.Join(builtBackends(), ", "))
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

func openPF(cfg BackendConfig) (*OpenedBackend, error) {
	opts := PFOptions(cfg.Settings, cfg.getenv)
	opts.KnownLinks = cfg.KnownLinks
	run := cfg.Runner
	if run == nil {
		for _, tool := range []struct{ name, path, env string }{{"pfctl", opts.Pfctl, pfdn.EnvPfctl}, {"dnctl", opts.Dnctl, pfdn.EnvDnctl}} {
			if err := checkTool(tool.path); err != nil {
				return nil, fmt.Errorf("%w: %s: %v (macake needs macOS's %s; %s overrides the path)", ErrUnavailable, tool.name, err, tool.name, tool.env)
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
		return nil, err
	}
	return &OpenedBackend{
		Backend:     b,
		Name:        "pf",
		Scope:       fmt.Sprintf("pf anchor %q, dummynet pipes %s", opts.Anchor, opts.Pipes),
		System:      "pf/dummynet",
		SharedGroup: "pf",
		MaxSlots:    opts.Pipes.Slots(),
		LiveSlots:   func(ctx context.Context) (SlotUse, error) { return pfLiveSlots(ctx, b, opts.Pipes) },
		ShaperName: func(l shape.Link, d shape.Direction) string {
			n, err := opts.Pipes.Pipe(l.Slot, d)
			if err != nil {
				return ""
			}
			return "pipe " + strconv.Itoa(n)
		},
		LiveShapers: func(ctx context.Context) ([]LiveShaper, error) { return pfLiveShapers(ctx, b, opts.Pipes) },
		PlanUnread:  b.PlanUnobserved,
	}, nil
}

// pfLiveShapers lists the pipes in macake's range with the interface and
// direction of the anchor rule that names each.
func pfLiveShapers(ctx context.Context, b *pfdn.Backend, r pfdn.PipeRange) ([]LiveShaper, error) {
	live, err := b.Observe(ctx)
	if err != nil {
		return nil, err
	}
	rules := map[int]pfdn.Rule{}
	for _, rule := range live.Anchor.Rules {
		if rule.Action == "dummynet" && rule.Pipe != 0 {
			rules[rule.Pipe] = rule
		}
	}
	var out []LiveShaper
	for _, p := range live.Dummynet.Pipes {
		if !r.Contains(p.Number) {
			continue
		}
		s := LiveShaper{Name: "pipe " + strconv.Itoa(p.Number), RateBits: p.Config.BandwidthBits, QueueBytes: p.Config.QueueBytes}
		if rule, ok := rules[p.Number]; ok {
			s.Interface = rule.Interface
			switch rule.Direction {
			case "out":
				s.Direction = shape.Upload.String()
			case "in":
				s.Direction = shape.Download.String()
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// pfLiveSlots reads the anchor's rules: `dummynet out on IF … pipe N`
// with N in the range names IF's slot. A pipe in the range that no rule
// in the anchor names makes its slot foreign.
func pfLiveSlots(ctx context.Context, b *pfdn.Backend, r pfdn.PipeRange) (SlotUse, error) {
	live, err := b.Observe(ctx)
	if err != nil {
		return SlotUse{}, err
	}
	use := SlotUse{Interfaces: map[string]int{}, Foreign: map[int]bool{}}
	named := map[int]bool{}
	if live.Anchor.Exists {
		for _, rule := range live.Anchor.Rules {
			if rule.Pipe != 0 {
				named[rule.Pipe] = true
			}
			if rule.Action == "dummynet" && rule.Interface != "" && r.Contains(rule.Pipe) {
				use.Interfaces[rule.Interface] = (rule.Pipe - r.First) / 2
			}
		}
	}
	for _, p := range live.Dummynet.Pipes {
		if r.Contains(p.Number) && !named[p.Number] && (p.Number-r.First)/2 < r.Slots() {
			use.Foreign[(p.Number-r.First)/2] = true
		}
	}
	return use, nil
}

// The environment variables that override the tc backend's tool paths
// (tc.DefaultTools reads the same names).
const (
	EnvTC      = "MACAKE_TC"
	EnvIP      = "MACAKE_IP"
	EnvUnshare = "MACAKE_UNSHARE"
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

func openTC(cfg BackendConfig) (*OpenedBackend, error) {
	tools := TCTools(cfg.getenv)
	run := cfg.Runner
	if run == nil {
		for _, tool := range []struct{ name, path, env string }{{"tc", tools.TC, EnvTC}, {"ip", tools.IP, EnvIP}} {
			if err := checkToolOnPath(tool.path); err != nil {
				return nil, fmt.Errorf("%w: %s: %v (macake needs iproute2's %s on Linux: apt-get install iproute2; %s overrides the path)",
					ErrUnavailable, tool.name, err, tool.name, tool.env)
			}
		}
		run = execrun.Exec{Timeout: tcTimeout}
	}
	b := &tc.Backend{Runner: run, Tools: tools, Owners: cfg.Ownership}
	if o, ok := cfg.Tokens.(tc.Ownership); ok && b.Owners == nil {
		b.Owners = o
	}
	return &OpenedBackend{
		Backend: b,
		Name:    "tc",
		Scope: fmt.Sprintf("tc: root qdiscs %s, ingress filters at prefs %d-%d, IFB devices %s*",
			tc.FormatHandle(tc.RootHandle), tc.ExemptIPv4Pref, tc.RedirectPref, tc.IFBPrefix),
		System:      "tc",
		SharedGroup: "tc",
		MaxSlots:    tc.MaxSlot + 1,
		LiveSlots: func(ctx context.Context) (SlotUse, error) {
			slots, err := tcLiveSlots(ctx, b)
			return SlotUse{Interfaces: slots}, err
		},
		KernelOverhead: true,
		ShaperName:     tcShaperName,
		LiveShapers:    func(ctx context.Context) ([]LiveShaper, error) { return tcLiveShapers(ctx, b) },
	}, nil
}

// tcLiveSlots reads the ingress redirects: macake's redirect on IF to
// ifb-macake<N> names IF's slot N.
func tcLiveSlots(ctx context.Context, b *tc.Backend) (map[string]int, error) {
	live, err := b.Observe(ctx)
	if err != nil {
		return nil, err
	}
	slots := map[string]int{}
	for name, dev := range live.Devices {
		for _, f := range dev.IngressFilters {
			if f.Header || f.Pref != tc.RedirectPref {
				continue
			}
			for _, a := range f.Actions {
				if n, ok := tc.IFBSlot(a.ToDev); ok && a.Kind == "mirred" {
					slots[name] = n
				}
			}
		}
	}
	return slots, nil
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
