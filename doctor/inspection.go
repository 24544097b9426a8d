// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"errors"
	"io/fs"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/session"
	"github.com/macake/macake/state"
)

// Inspection gathers the facts the checks judge, each at most once, so that
// several checks can look at the same pf state or configuration without
// reading it twice.
type Inspection struct {
	sys System

	backendOnce  lazy[backendFacts]
	configOnce   lazy[configFacts]
	stateOnce    lazy[stateFacts]
	factsOnce    lazy[linkFacts]
	pfToolsOnce  lazy[pfTools]
	pfLiveOnce   lazy[pfLive]
	anchorsOnce  lazy[anchorFacts]
	driftOnce    lazy[driftFacts]
	echoOnce     lazy[echoFacts]
	countersOnce lazy[counterFacts]
	watchOnce    lazy[watchFacts]
	tcOnce       lazy[tcFacts]
}

// NewInspection returns an Inspection of sys. Nothing is read until a check
// asks.
func NewInspection(sys System) *Inspection {
	if sys.Getenv == nil {
		sys.Getenv = func(string) string { return "" }
	}
	return &Inspection{sys: sys}
}

// prefetch starts the slow, independent measurements (echoes to the
// reflectors, two counter readings a moment apart) so they run while the
// other checks read pf and the files.
func (in *Inspection) prefetch(ctx context.Context) {
	in.config()
	in.facts(ctx)
	go in.echoes(ctx)
	go in.counters(ctx)
}

// backendFacts is the backend this machine uses.
type backendFacts struct {
	name string
	// why says what chose it, e.g. "chosen for macOS".
	why string
	err error
}

func (in *Inspection) backend() backendFacts {
	return in.backendOnce.get(func() backendFacts {
		name, err := backend.Choose(in.sys.GOOS, in.sys.Getenv)
		b := backendFacts{name: name, err: err}
		switch {
		case in.sys.Getenv(backend.EnvBackend) != "":
			b.why = "chosen by " + backend.EnvBackend + "=" + name
		case in.sys.GOOS == "darwin":
			b.why = "chosen for macOS"
		case name == "pf":
			b.why = "chosen because MACAKE_PFCTL or MACAKE_DNCTL is set (the emulator)"
		case in.sys.GOOS == "linux":
			b.why = "chosen for Linux"
		default:
			b.why = "chosen for " + in.sys.GOOS
		}
		return b
	})
}

func (in *Inspection) isPF() bool { return in.backend().name == "pf" }
func (in *Inspection) isTC() bool { return in.backend().name == "tc" }

// configFacts is the configuration as apply and watch read it.
type configFacts struct {
	dir        string
	dirMissing bool
	policies   settings.Policies
	// policyProblems and settingsProblems are the problems of the policy
	// files and of macake.toml.
	policyProblems   []*config.Problem
	settingsProblems []*config.Problem
	settingsPresent  bool
	// stateDir is where the state file lives: --state-dir, or state_dir
	// from macake.toml when --state-dir was not given.
	stateDir string
}

func (in *Inspection) config() configFacts {
	return in.configOnce.get(func() configFacts {
		c := configFacts{dir: in.sys.ConfigDir}
		target := config.TargetDarwin
		if in.isTC() {
			target = config.TargetLinux
		}
		if _, err := in.sys.FS.Stat(c.dir); errors.Is(err, fs.ErrNotExist) {
			c.dirMissing = true
		}
		// Ownership is judged by its own check, as root sees it, whoever
		// runs doctor.
		p, err := settings.LoadPolicies(c.dir, session.LoadOptions(target, true))
		c.policies = p
		if _, serr := in.sys.FS.Stat(p.SettingsFile); serr == nil {
			c.settingsPresent = true
		}
		for _, pr := range config.Problems(err) {
			switch {
			case pr.File == p.SettingsFile:
				c.settingsProblems = append(c.settingsProblems, pr)
			case c.dirMissing && pr.File == c.dir:
				// Reported as "no policy directory", not as a problem.
			default:
				c.policyProblems = append(c.policyProblems, pr)
			}
		}
		c.stateDir = p.Settings.StateDirFor(in.sys.StateDir, in.sys.StateDirIsDefault)
		return c
	})
}

// stateFacts is the state file.
type stateFacts struct {
	path    string
	exists  bool
	state   *state.State
	err     error
	corrupt bool
}

func (in *Inspection) state() stateFacts {
	return in.stateOnce.get(func() stateFacts {
		dir := in.config().stateDir
		s := stateFacts{path: state.Path(dir)}
		if _, err := in.sys.FS.Stat(s.path); err == nil {
			s.exists = true
		}
		st, err := state.Load(dir)
		s.state, s.err = st, err
		s.corrupt = errors.Is(err, state.ErrCorrupt)
		if st == nil {
			s.state = &state.State{}
		}
		return s
	})
}

// linkFacts is the network the machine is on and the policies that match
// it.
type linkFacts struct {
	facts      linkfacts.Facts
	err        error
	selection  desired.Selection
	def        linkfacts.InterfaceFacts
	hasDefault bool
}

func (in *Inspection) facts(ctx context.Context) linkFacts {
	return in.factsOnce.get(func() linkFacts {
		var f linkFacts
		if in.sys.Facts == nil {
			f.err = errors.New("no link-facts source")
			return f
		}
		f.facts, f.err = in.sys.Facts.Facts(ctx)
		if f.err != nil {
			return f
		}
		f.selection = desired.Match(in.config().policies.Links, f.facts)
		f.def, f.hasDefault = linkfacts.DefaultInterface(f.facts)
		return f
	})
}
