// SPDX-License-Identifier: Apache-2.0

// Package pfdn is macake's macOS backend: the only package that knows the
// syntax of pfctl and dnctl. It renders the backend-neutral desired state
// (shape.State) into the pf anchor com.apple/macake and a set of dummynet
// pipes, reads the live state back from pfctl/dnctl output, computes the
// ordered plan that makes the two match (Diff, pure), and executes that plan
// through a execrun.Runner (execrun.Exec on a Mac, the pfdntest emulator in
// tests).
//
// What macake owns on a Mac, and nothing else: the anchor, the pipes in a
// reserved number range, and one pf enable reference (a pfctl -E token). The
// facts this package relies on are in docs/DUMMYNET.md, each with the section
// of the pf/dummynet reference it comes from.
package pfdn

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/macake/macake/shape"
)

// Defaults for Options.
const (
	// DefaultAnchor is evaluated by the stock main ruleset's
	// `dummynet-anchor "com.apple/*"`, so macake never edits the main ruleset.
	DefaultAnchor = "com.apple/macake"
	// DefaultPfctl and DefaultDnctl are where macOS installs the tools.
	DefaultPfctl = "/sbin/pfctl"
	DefaultDnctl = "/usr/sbin/dnctl"
	// DefaultFirstPipe and DefaultLastPipe bound the reserved pipe range.
	DefaultFirstPipe = 48001
	DefaultLastPipe  = 48998
	// DefaultCommandTimeout bounds one pfctl/dnctl call; they answer in
	// milliseconds, so a call this slow is hung.
	DefaultCommandTimeout = 10 * time.Second
)

// Environment variables that replace the tool paths (tests and the emulator
// binaries use them).
const (
	EnvPfctl = "MACAKE_PFCTL"
	EnvDnctl = "MACAKE_DNCTL"
)

// MaxPfPipe is the highest pipe number a pf rule can name (pf stores it in
// 16 bits; dnctl accepts more, but such pipes are unreachable from pf).
const MaxPfPipe = 65535

// PipeRange is the reserved, inclusive range of dummynet pipe numbers that
// macake owns. Each link takes two consecutive numbers: upload at
// First+2*Slot, download at First+2*Slot+1.
type PipeRange struct {
	First, Last int
}

// DefaultPipeRange is 48001–48998 (499 links).
var DefaultPipeRange = PipeRange{First: DefaultFirstPipe, Last: DefaultLastPipe}

// Contains reports whether pipe n is inside the range.
func (r PipeRange) Contains(n int) bool { return n >= r.First && n <= r.Last }

// Slots returns how many links fit in the range.
func (r PipeRange) Slots() int {
	if r.Last < r.First {
		return 0
	}
	return (r.Last - r.First + 1) / 2
}

// Pipe returns the pipe number of a link's slot and direction.
func (r PipeRange) Pipe(slot int, d shape.Direction) (int, error) {
	if slot < 0 || slot >= r.Slots() {
		return 0, fmt.Errorf("link slot %d is outside the pipe range %s (room for %d links)", slot, r, r.Slots())
	}
	n := r.First + 2*slot
	if d == shape.Download {
		n++
	}
	return n, nil
}

// Slot returns the link slot that pipe n belongs to (Pipe's inverse), and
// false for a pipe outside the range's slots.
func (r PipeRange) Slot(n int) (int, bool) {
	if !r.Contains(n) {
		return 0, false
	}
	slot := (n - r.First) / 2
	return slot, slot < r.Slots()
}

// Direction returns the direction pipe n shapes (with Slot, Pipe's
// inverse), and false for a pipe outside the range's slots. Labels of
// leftover pipes need it; the numbering stays in this one place.
func (r PipeRange) Direction(n int) (shape.Direction, bool) {
	if _, ok := r.Slot(n); !ok {
		return shape.Upload, false
	}
	if (n-r.First)%2 == 1 {
		return shape.Download, true
	}
	return shape.Upload, true
}

// String returns "48001-48998".
func (r PipeRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Validate checks that the range holds at least one link and that pf can
// reach every pipe in it.
func (r PipeRange) Validate() error {
	switch {
	case r.First < 1:
		return fmt.Errorf("pipe range %s: the first pipe must be at least 1", r)
	case r.Last > MaxPfPipe:
		return fmt.Errorf("pipe range %s: pf rules can only name pipes up to %d", r, MaxPfPipe)
	case r.Slots() < 1:
		return fmt.Errorf("pipe range %s: needs at least two pipes (one link)", r)
	}
	return nil
}

// Options configure the backend: tool paths, the anchor and the pipe range.
type Options struct {
	// Pfctl and Dnctl are the tools' paths.
	Pfctl, Dnctl string
	// Anchor is the pf anchor macake owns, e.g. "com.apple/macake".
	Anchor string
	// Pipes is the reserved pipe-number range.
	Pipes PipeRange
	// CommandTimeout bounds each pfctl/dnctl call; 0 means
	// DefaultCommandTimeout.
	CommandTimeout time.Duration
	// KnownLinks, when set, returns every link name macake has given a
	// slot (the state file's slots, including links since removed from the
	// config whose pipes may still be live). It is the evidence, besides
	// the anchor's rules, that a pipe in the range is macake's: without it
	// a pipe no rule names is never changed or deleted. It also names the
	// leftover pipes and rules of removed links in plans, so they group
	// under their link.
	KnownLinks func() map[string]int
}

// DefaultOptions returns the production settings.
func DefaultOptions() Options {
	return Options{
		Pfctl:          DefaultPfctl,
		Dnctl:          DefaultDnctl,
		Anchor:         DefaultAnchor,
		Pipes:          DefaultPipeRange,
		CommandTimeout: DefaultCommandTimeout,
	}
}

// WithEnv returns o with the tool paths replaced by MACAKE_PFCTL and
// MACAKE_DNCTL when those are set.
func (o Options) WithEnv(getenv func(string) string) Options {
	if p := getenv(EnvPfctl); p != "" {
		o.Pfctl = p
	}
	if p := getenv(EnvDnctl); p != "" {
		o.Dnctl = p
	}
	return o
}

// Validate reports the first problem with o.
func (o Options) Validate() error {
	if o.Pfctl == "" || o.Dnctl == "" {
		return errors.New("pfdn: the pfctl and dnctl paths must be set")
	}
	if err := shape.CheckAnchorName(o.Anchor); err != nil {
		return err
	}
	return o.Pipes.Validate()
}

func (o Options) timeout() time.Duration {
	if o.CommandTimeout > 0 {
		return o.CommandTimeout
	}
	return DefaultCommandTimeout
}

// HookLine is the main-ruleset line that makes pf evaluate anchor: the
// wildcard over its parent (`dummynet-anchor "com.apple/*"` for the default
// anchor), or the anchor itself when it sits at the top level.
func HookLine(anchor string) string {
	if i := strings.LastIndexByte(anchor, '/'); i >= 0 {
		return fmt.Sprintf("dummynet-anchor %q", anchor[:i]+"/*")
	}
	return fmt.Sprintf("dummynet-anchor %q", anchor)
}
