// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/state"
)

// policySet is the policies in force: what each file said when it last
// parsed, which files have errors now, and the copies of the last good
// policies on disk that stand in for a broken file after a restart.
type policySet struct {
	cfg *Config
	log *slog.Logger
	ev  logging.Events

	lastGood map[string]config.Link // by link name
	copies   *state.LastGoodStore
	// copyFailed is the last error saving each link's copy, logged once.
	copyFailed map[string]string
	// inForce are the problems of each file with errors, as last logged.
	inForce  map[string][]*config.Problem
	warnings string
}

func newPolicySet(cfg *Config, log *slog.Logger, ev logging.Events) *policySet {
	return &policySet{
		cfg: cfg, log: log, ev: ev, lastGood: map[string]config.Link{}, copies: state.NewLastGoodStore(cfg.StateDir),
		copyFailed: map[string]string{}, inForce: map[string][]*config.Problem{},
	}
}

// links returns the policies in force, in name order.
func (s *policySet) links() []config.Link {
	out := make([]config.Link, 0, len(s.lastGood))
	for _, name := range slices.Sorted(maps.Keys(s.lastGood)) {
		out = append(out, s.lastGood[name])
	}
	return out
}

// load re-reads the policy directory. A file that stops parsing keeps its
// last good policy in force; a file that never parsed applies nothing; a
// deleted file removes its link; a directory that cannot be read keeps
// everything. Each error is logged once, when it appears, and its fix when
// it goes.
func (s *policySet) load(ctx context.Context) {
	links, warnings, err := config.Load(s.cfg.ConfigDir, s.cfg.LoadOptions)
	problems := config.Problems(err)
	byFile := map[string][]*config.Problem{}
	dirTrouble := false
	for _, p := range problems {
		if p.File == "" || filepath.Clean(p.File) == filepath.Clean(s.cfg.ConfigDir) {
			dirTrouble = true
		}
		byFile[p.File] = append(byFile[p.File], p)
	}
	good := map[string]config.Link{}
	fromDir := map[string]bool{}
	if dirTrouble {
		maps.Copy(good, s.lastGood)
	} else {
		for _, l := range links {
			good[l.Name], fromDir[l.Name] = l, true
		}
		for _, file := range slices.Sorted(maps.Keys(byFile)) {
			name := config.LinkName(file)
			if old, ok := s.lastGood[name]; ok {
				good[name] = old
			} else if saved, ok := s.copies.Load(name, file, s.cfg.LoadOptions); ok {
				// The first pass since a start: memory has nothing, the
				// copy saved when the file was last accepted stands in.
				good[name] = saved
				s.log.Warn("policy file has errors; the last good policy, saved when watch last accepted the file, stays in force", logging.KeyLink, name, "file", file, "copy", s.copies.Path(name))
			}
		}
	}
	s.keepCopies(good, fromDir, dirTrouble)
	// Log what appeared, changed or went away.
	for _, file := range slices.Sorted(maps.Keys(byFile)) {
		if reflect.DeepEqual(s.inForce[file], byFile[file]) {
			continue
		}
		name := config.LinkName(file)
		kept := logging.KeptNothing
		if _, ok := good[name]; ok {
			kept = logging.KeptLastGood
		}
		for _, p := range byFile[file] {
			s.ev.ConfigError(ctx, logging.ConfigProblem{File: p.File, Line: p.Line, Column: p.Col, Message: p.Message, Link: name, Kept: kept})
		}
	}
	for _, file := range slices.Sorted(maps.Keys(s.inForce)) {
		if _, still := byFile[file]; still {
			continue
		}
		if _, err := os.Stat(file); err == nil {
			s.ev.ConfigFixed(ctx, config.LinkName(file), file)
		} else {
			s.log.Info("a policy file with an error in force was removed", logging.KeyEvent, string(logging.EventConfigFixed), logging.KeyLink, config.LinkName(file), "file", file)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.lastGood)) {
		if _, ok := good[name]; !ok {
			s.log.Info("policy file removed; its link goes", logging.KeyLink, name, "file", s.lastGood[name].File)
		}
	}
	var ws []string
	for _, w := range warnings {
		ws = append(ws, w.String())
	}
	if text := strings.Join(ws, "\n"); text != s.warnings {
		s.warnings = text
		for _, w := range ws {
			s.log.Warn("policy file warning", "warning", w)
		}
	}
	s.lastGood, s.inForce = good, byFile
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.SetConfigErrors(len(problems))
	}
}

// keepCopies brings the saved copies in where memory has no last good
// policy (the first pass after a start), and saves or forgets copies as
// the accepted policies change. fromDir says which links of good were
// read from their files in this pass (the others are kept ones).
func (s *policySet) keepCopies(good map[string]config.Link, fromDir map[string]bool, dirTrouble bool) {
	c := s.copies
	if c == nil {
		return
	}
	if dirTrouble {
		// Nothing can be read: every saved copy stands in for its file
		// until the directory is back.
		names, _ := c.Names() // unreadable: nothing to stand in
		for _, name := range names {
			if _, ok := good[name]; ok {
				continue
			}
			if l, ok := c.Load(name, filepath.Join(s.cfg.ConfigDir, name+".toml"), s.cfg.LoadOptions); ok {
				good[name] = l
				s.log.Warn("the policy directory cannot be read; the saved copy of this link's last good policy stays in force", logging.KeyLink, name, "copy", c.Path(name))
			}
		}
		return
	}
	for _, name := range slices.Sorted(maps.Keys(good)) {
		if !fromDir[name] {
			continue
		}
		err := c.Save(good[name], s.cfg.LoadOptions)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != s.copyFailed[name] {
			if err != nil {
				s.log.Warn("cannot keep a copy of the policy; a restart with this file broken would not keep it in force", logging.KeyLink, name, logging.KeyError, err)
			}
			s.copyFailed[name] = msg
		}
	}
	if err := c.ForgetAllBut(good); err != nil {
		s.log.Warn("cannot remove the saved copy of a removed policy", logging.KeyError, err)
	}
}
