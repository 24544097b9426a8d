// SPDX-License-Identifier: Apache-2.0

package state

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/internal/safefile"
)

// LastGoodDir is where watch keeps a copy of every policy file as it last
// accepted it, inside the state directory. A broken file keeps its last
// good policy in force; held only in memory, that policy would die with
// the daemon, and the next start (launchd after a crash, an upgrade, a
// reboot) would find a broken file and nothing to keep, and tear working
// shaping down. The copies make "a bad edit never tears shaping down"
// hold across restarts.
func LastGoodDir(stateDir string) string { return filepath.Join(stateDir, "last-good") }

// LastGoodStore reads and writes the saved copies. It is used only by the
// daemon's Run goroutine.
type LastGoodStore struct {
	dir string
	// saved is what each copy on disk holds, once read or written (a nil
	// entry: known to be absent), so that a pass with nothing new does no
	// I/O.
	saved map[string]*savedPolicy
}

type savedPolicy struct {
	link config.Link
	src  []byte
}

// NewLastGoodStore returns the store in stateDir's LastGoodDir; nil (a
// store that holds nothing) when stateDir is "".
func NewLastGoodStore(stateDir string) *LastGoodStore {
	if stateDir == "" {
		return nil
	}
	return &LastGoodStore{dir: LastGoodDir(stateDir), saved: map[string]*savedPolicy{}}
}

// Path is where the named link's copy is kept.
func (s *LastGoodStore) Path(name string) string { return filepath.Join(s.dir, name+".toml") }

// Load returns the saved copy of the named link's policy, parsed as if it
// were file (so that its name and positions are the file's).
func (s *LastGoodStore) Load(name, file string, opts config.LoadOptions) (config.Link, bool) {
	if s == nil {
		return config.Link{}, false
	}
	if sp, ok := s.saved[name]; ok {
		if sp == nil {
			return config.Link{}, false
		}
		return sp.link, true
	}
	src, _, err := safefile.Read(s.Path(name), config.MaxFileSize)
	if err != nil {
		s.saved[name] = nil
		return config.Link{}, false
	}
	l, _, err := config.Parse(file, src, opts)
	if err != nil {
		// A copy this macake cannot read (written by another version, or
		// damaged) is no fallback.
		s.saved[name] = nil
		return config.Link{}, false
	}
	s.saved[name] = &savedPolicy{link: l, src: src}
	return l, true
}

// Save records l, just accepted from its file, unless the copy already
// holds it. The file is read again and must parse to l: an editor may have
// written it since Load read it, and only what was accepted is saved.
func (s *LastGoodStore) Save(l config.Link, opts config.LoadOptions) error {
	if s == nil {
		return nil
	}
	if _, known := s.saved[l.Name]; !known {
		s.Load(l.Name, l.File, opts)
	}
	if sp := s.saved[l.Name]; sp != nil && reflect.DeepEqual(sp.link, l) {
		return nil
	}
	src, _, err := safefile.Read(l.File, config.MaxFileSize)
	if err != nil {
		return fmt.Errorf("reading %s again to keep a copy: %w", l.File, err)
	}
	if again, _, err := config.Parse(l.File, src, opts); err != nil || !reflect.DeepEqual(again, l) {
		return nil // changed since; the next pass sees the new version
	}
	if sp := s.saved[l.Name]; sp != nil && bytes.Equal(sp.src, src) {
		s.saved[l.Name] = &savedPolicy{link: l, src: src}
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", s.dir, err)
	}
	if err := safefile.WriteAtomic(s.Path(l.Name), src, 0o600); err != nil {
		return err
	}
	s.saved[l.Name] = &savedPolicy{link: l, src: src}
	return nil
}

// ForgetAllBut removes the copies of links that are gone (their file was
// deleted, or never parsed and has no copy): the user's intent is that
// they go, and a later broken file of the same name must not bring an old
// policy back.
func (s *LastGoodStore) ForgetAllBut(keep map[string]config.Link) error {
	names, err := s.Names()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if _, kept := keep[name]; !kept {
			errs = append(errs, s.Remove(name))
		}
	}
	return errors.Join(errs...)
}

// Remove deletes the named link's copy, if any.
func (s *LastGoodStore) Remove(name string) error {
	if err := os.Remove(s.Path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	s.saved[name] = nil
	return nil
}

// Names lists the links that have a saved copy; none when the directory
// does not exist yet.
func (s *LastGoodStore) Names() ([]string, error) {
	if s == nil {
		return nil, nil
	}
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.dir, err)
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".toml"); ok && !e.IsDir() {
			out = append(out, name)
		}
	}
	return out, nil
}

// KeepLastGood adds to p, for every policy file with a problem, the copy
// watch saved in stateDir when it last accepted that file: what watch keeps
// in force, so that a picture drawn without it (status with no daemon,
// links) shows the same policies. It returns the names of the links it
// added. problems are the ones LoadPolicies reported.
func KeepLastGood(p *settings.Policies, problems []*config.Problem, stateDir string, opts config.LoadOptions) map[string]bool {
	kept := map[string]bool{}
	store := NewLastGoodStore(stateDir)
	have := map[string]bool{}
	for _, l := range p.Links {
		have[l.Name] = true
	}
	files := map[string]bool{}
	for _, pr := range problems {
		if pr.File == "" || filepath.Dir(filepath.Clean(pr.File)) != filepath.Clean(p.Dir) || !strings.HasSuffix(pr.File, ".toml") {
			continue // the directory's or the settings file's problem
		}
		files[pr.File] = true
	}
	for file := range files {
		name := config.LinkName(file)
		if have[name] {
			continue
		}
		if l, ok := store.Load(name, file, opts); ok {
			p.Links = append(p.Links, l)
			have[name], kept[name] = true, true
		}
	}
	slices.SortFunc(p.Links, func(a, b config.Link) int { return strings.Compare(a.Name, b.Name) })
	return kept
}

// PruneLastGood removes the saved copies of policies whose file is gone
// from configDir. watch prunes them itself while it runs; apply and down
// (which run when watch does not, holding the same lock) prune too, so a
// file deleted while watch was stopped cannot come back through its copy
// when a new, broken file of the same name appears before watch starts.
// An unreadable configDir prunes nothing.
func PruneLastGood(stateDir, configDir string) error {
	if info, err := os.Stat(configDir); err != nil || !info.IsDir() {
		return nil
	}
	s := NewLastGoodStore(stateDir)
	names, _ := s.Names() // unreadable: nothing this run can prune
	var errs []error
	for _, name := range names {
		if _, err := os.Lstat(filepath.Join(configDir, name+".toml")); errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, s.Remove(name))
		}
	}
	return errors.Join(errs...)
}
