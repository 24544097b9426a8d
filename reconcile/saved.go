// SPDX-License-Identifier: Apache-2.0

package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/shape"
)

// SavedPlanFormat is the version of the saved plan file; a file of another
// version is refused, not guessed at.
const SavedPlanFormat = 1

// SavedPlan is a reviewed plan, as terraform saves one: `macake plan -out
// FILE` writes it, `macake apply FILE` applies exactly its ops, and
// refuses when what it was made from has changed since. It is data: the
// plan, the desired state and slot allocation it was made for, and the
// fingerprints of its inputs.
type SavedPlan struct {
	Format int `json:"format"`
	// Made is when the plan was made.
	Made time.Time `json:"made"`
	// Backend is the backend it was made for ("pf", "tc").
	Backend string `json:"backend"`
	// Link is the one link it acts on (`plan --link NAME`), "" for all.
	Link string `json:"link,omitempty"`
	// From are the fingerprints of what it was made from.
	From Fingerprints `json:"from"`
	// Desired is the desired state the plan makes live; Slots the slot
	// allocation saved before it is applied and Released the links whose
	// slots are given up after (Desire).
	Desired  shape.State    `json:"desired"`
	Slots    map[string]int `json:"slots"`
	Released []string       `json:"released,omitempty"`
	// Plan is the plan as it was shown.
	Plan plan.Plan `json:"-"`
}

// Fingerprints say what a plan was made from, so that applying it later
// can tell whether any of it changed.
type Fingerprints struct {
	// ConfigDir is the policy directory.
	ConfigDir string `json:"config_dir"`
	// Policies maps each policy file of ConfigDir, and the daemon settings
	// file next to it when there is one, to the SHA-256 of its bytes.
	Policies map[string]string `json:"policies"`
	// Network describes, per interface the policies name, its facts
	// (up, gateway IP and MAC, SSID): which policy matches follows from
	// them.
	Network map[string]string `json:"network"`
	// Slots is the state file's slot allocation.
	Slots map[string]int `json:"state_slots"`
	// Live is LiveFingerprint of the backend's plan: the live state as it
	// bears on the desired state.
	Live string `json:"live"`
}

// LiveFingerprint is the fingerprint of the live state a backend planned
// against: the SHA-256 of its plan for the desired state (every owned
// object that differs, with its live values, and the warnings about
// other tools' objects). Planning the same desired state against a live
// state that changed in any way that matters gives another plan, so
// another fingerprint; one that did not change gives the same.
func LiveFingerprint(p plan.Plan) string {
	b, err := plan.EncodeExact(p)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// PolicyFingerprints hashes the policy files of dir (those config.Load
// reads) and the daemon settings file next to it. Take them before
// loading: a file changed in between then makes the plan refuse to apply,
// never apply a policy nobody reviewed.
func PolicyFingerprints(dir string) (map[string]string, error) {
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("fingerprinting the policy files: %w", err)
	}
	files := []string{settings.DaemonFileFor(dir)}
	for _, e := range entries {
		if config.IsPolicyFile(e.Name()) && !e.IsDir() {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, fmt.Errorf("fingerprinting %s: %w", f, err)
		}
		sum := sha256.Sum256(b)
		out[f] = hex.EncodeToString(sum[:])
	}
	return out, nil
}

// NetworkFingerprints describes the facts of each interface in ifaces.
func NetworkFingerprints(facts linkfacts.Facts, ifaces []string) map[string]string {
	out := map[string]string{}
	for _, name := range ifaces {
		f, ok := facts.Interface(name)
		if !ok {
			out[name] = "absent"
			continue
		}
		out[name] = linkfacts.Describe(linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{f}})
	}
	return out
}

// NewSavedPlan makes the saved form of a plan-only pass's outcome o.
// policies are PolicyFingerprints taken before the policies were loaded;
// in is the pass's input (its facts, links, state file and scope).
func NewSavedPlan(o *Outcome, in PassInput, backendName, configDir string, policies map[string]string, made time.Time) (*SavedPlan, error) {
	switch {
	case o.Blind:
		return nil, errors.New("the plan was made without reading the live state (it needs root), so it cannot be saved to apply later; run it with sudo")
	case o.Step != StepDone:
		return nil, fmt.Errorf("the plan is not complete (it stopped at %s), so it cannot be saved", o.Step)
	case o.Live == "":
		return nil, errors.New("the plan carries no fingerprint of the live state (only a plan-only pass makes one), so it cannot be saved")
	}
	return &SavedPlan{
		Format: SavedPlanFormat, Made: made.UTC(), Backend: backendName, Link: in.Link,
		From: Fingerprints{
			ConfigDir: configDir, Policies: policies,
			Network: NetworkFingerprints(in.Facts, PolicyInterfaces(in.Links)),
			Slots:   maps.Clone(in.Store.State.Slots), Live: o.Live,
		},
		Desired: o.Desired, Slots: o.Desire.Slots, Released: o.Desire.Released, Plan: o.Plan,
	}, nil
}

// savedFile is the file's JSON: the saved plan and its exact plan.
type savedFile struct {
	*SavedPlan
	Plan json.RawMessage `json:"plan"`
}

// Write saves s to path (mode 0600: it is the exact list of commands root
// will run), replacing the file.
func (s *SavedPlan) Write(path string) error {
	p, err := plan.EncodeExact(s.Plan)
	if err != nil {
		return fmt.Errorf("encoding the plan: %w", err)
	}
	b, err := json.MarshalIndent(savedFile{SavedPlan: s, Plan: p}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the plan: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("saving the plan: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving the plan: %w", err)
	}
	return nil
}

// ReadSavedPlan reads a plan saved by Write.
func ReadSavedPlan(path string) (*SavedPlan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the saved plan: %w", err)
	}
	f := savedFile{SavedPlan: &SavedPlan{}}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s is not a saved plan (make one with 'macake plan -out FILE'): %w", path, err)
	}
	if f.Format != SavedPlanFormat {
		return nil, fmt.Errorf("%s: saved plan format %d, this macake reads format %d; make the plan again with this macake", path, f.Format, SavedPlanFormat)
	}
	if f.SavedPlan.Plan, err = plan.DecodeExact(f.Plan); err != nil {
		return nil, fmt.Errorf("%s: the plan: %w", path, err)
	}
	return f.SavedPlan, nil
}

// StaleError is a saved plan's refusal to apply: what it was made from
// has changed since. Changes says what, one finding each.
type StaleError struct {
	Changes []string
}

// Error lists the changes and what to do.
func (e *StaleError) Error() string {
	return "the saved plan no longer fits what it was made from (" + strings.Join(e.Changes, "; ") +
		"); nothing was changed; make a new plan with 'macake plan -out FILE' and review it"
}

// inputChanges compares the fingerprints of the saved plan's inputs but
// the live state with now's.
func (s *SavedPlan) inputChanges(backendName, configDir string, policies map[string]string, facts linkfacts.Facts, slots map[string]int) []string {
	var out []string
	if s.Backend != backendName {
		out = append(out, fmt.Sprintf("it was made for the %s backend, and this run uses %s", s.Backend, backendName))
	}
	if s.From.ConfigDir != configDir {
		out = append(out, fmt.Sprintf("it was made from the policies in %s, and this run reads %s", s.From.ConfigDir, configDir))
	}
	for _, f := range slices.Sorted(maps.Keys(s.From.Policies)) {
		switch now, ok := policies[f]; {
		case !ok:
			out = append(out, f+" was removed")
		case now != s.From.Policies[f]:
			out = append(out, f+" changed")
		}
	}
	for _, f := range slices.Sorted(maps.Keys(policies)) {
		if _, ok := s.From.Policies[f]; !ok {
			out = append(out, f+" was added")
		}
	}
	now := NetworkFingerprints(facts, slices.Sorted(maps.Keys(s.From.Network)))
	for _, iface := range slices.Sorted(maps.Keys(s.From.Network)) {
		if now[iface] != s.From.Network[iface] {
			out = append(out, fmt.Sprintf("the network changed: %s was %q and is %q", iface, s.From.Network[iface], now[iface]))
		}
	}
	if !maps.Equal(s.From.Slots, slots) {
		out = append(out, "the state file's pipe slots changed (another apply, down or watch ran since)")
	}
	return out
}

// liveChanges says how the backend's plan now differs from the saved one.
func (s *SavedPlan) liveChanges(now plan.Plan) []string {
	if LiveFingerprint(now) == s.From.Live {
		return nil
	}
	summaries := func(p plan.Plan) []string {
		var out []string
		for _, op := range p.Ops {
			out = append(out, op.Summary())
		}
		return out
	}
	was, is := summaries(s.Plan), summaries(now)
	var gone, needed []string
	for _, x := range was {
		if !slices.Contains(is, x) {
			gone = append(gone, "'"+x+"'")
		}
	}
	for _, x := range is {
		if !slices.Contains(was, x) {
			needed = append(needed, "'"+x+"'")
		}
	}
	// One finding, however many ops it touches: a list of every op
	// that no longer fits buries what to do (make a new plan).
	var parts []string
	if len(gone) > 0 {
		parts = append(parts, fmt.Sprintf("%s of the plan no longer %s (%s)", english.Plural(len(gone), "change"), fits(len(gone)), english.Join(gone, 2)))
	}
	if len(needed) > 0 {
		parts = append(parts, fmt.Sprintf("it now needs %s (%s)", english.Plural(len(needed), "other"), english.Join(needed, 2)))
	}
	if len(parts) == 0 {
		return []string{"the live state changed (the same changes are needed, but the system's answers differ: warnings or commands)"}
	}
	return []string{"the live state changed: " + strings.Join(parts, ", and ")}
}

func fits(n int) string {
	if n == 1 {
		return "fits it"
	}
	return "fit it"
}

// ApplySaved applies a reviewed plan exactly (`apply FILE`), once nothing
// it was made from has changed: the policy files of configDir, the
// network (facts must be the network now), the state file's slots and the
// live state. Otherwise it stops at StepStale and applies nothing. Its
// scope is the saved plan's (in.Link is not read).
func ApplySaved(ctx context.Context, in Run, s *SavedPlan, configDir string, facts linkfacts.Facts) Outcome {
	ctx = backend.WithLiveReading(ctx)
	in.Link = s.Link
	var o Outcome
	stop := func(step Step, err error) Outcome {
		o.Step, o.Err = step, err
		return o
	}
	o.Desired = s.Desired
	o.Desire = desired.Desire{State: s.Desired, Slots: s.Slots, Released: s.Released}
	o.Plan = s.Plan
	policies, err := PolicyFingerprints(configDir)
	if err != nil {
		return stop(StepDesire, err)
	}
	now, err := planFor(ctx, in.Backend, s.Desired, s.Link)
	if _, blocked := backend.Blocked(err); err != nil && !blocked {
		return stop(StepObserve, err)
	}
	o.Live = LiveFingerprint(now)
	var changes []string
	if !s.Plan.Empty() && now.Empty() && maps.Equal(in.Store.State.Slots, s.Slots) {
		// The system and the state file are what the plan makes: it
		// was applied (or the same changes were). That is the one
		// finding, not the slots and every op it no longer needs.
		changes = s.inputChanges(in.Backend.Info().Name, configDir, policies, facts, s.From.Slots)
		changes = append(changes, "it was applied already: the live state and the state file are what it makes")
	} else {
		changes = s.inputChanges(in.Backend.Info().Name, configDir, policies, facts, in.Store.State.Slots)
		changes = append(changes, s.liveChanges(now)...)
	}
	if len(changes) > 0 {
		return stop(StepStale, &StaleError{Changes: changes})
	}
	return in.finish(ctx, o, err)
}
