// SPDX-License-Identifier: Apache-2.0

// Package scratch is the record of the objects one `macake selftest` run
// creates on the system: its pf anchor, its dummynet pipes, its pf enable
// tokens, its network namespace. Each object is written into the record
// before it exists (a token right after pfctl prints it), so a selftest
// killed with SIGKILL leaves only objects that the next selftest or
// `macake down` finds here and removes. The record is a small JSON file in
// the state directory, written atomically.
package scratch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/macake/macake/internal/safefile"
)

// FileName is the record's file in the state directory.
const FileName = "selftest.json"

// Record lists one run's scratch objects.
type Record struct {
	// PID is the selftest process that wrote it.
	PID int `json:"pid"`
	// Started is when that run began.
	Started time.Time `json:"started"`
	// Backend is the suite's backend: "pf" or "tc".
	Backend string `json:"backend"`
	// Anchor is the scratch pf anchor, set before anything is loaded
	// into it.
	Anchor string `json:"anchor,omitempty"`
	// Pipes are the scratch dummynet pipes, each added before it is
	// configured.
	Pipes []int `json:"pipes,omitempty"`
	// Tokens are the pf enable references the run took (pfctl -E).
	Tokens []string `json:"pf_tokens,omitempty"`
	// Netns is the scratch network namespace (tc suite); it stands for
	// its peer namespace too.
	Netns string `json:"netns,omitempty"`
}

// Empty reports whether the record names no object.
func (r Record) Empty() bool {
	return r.Anchor == "" && len(r.Pipes) == 0 && len(r.Tokens) == 0 && r.Netns == ""
}

// Path returns the record's path in dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Load reads the record in dir; ok is false when there is none.
func Load(dir string) (rec Record, ok bool, err error) {
	b, err := os.ReadFile(Path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("reading the selftest's scratch record: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, false, fmt.Errorf("the selftest's scratch record %s is corrupt (%v); remove it once its objects are gone", Path(dir), err)
	}
	return rec, true, nil
}

// Remove deletes the record in dir; a missing one is fine.
func Remove(dir string) error {
	if err := os.Remove(Path(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the selftest's scratch record: %w", err)
	}
	return nil
}

// Ledger is the live record of a running selftest: every Add writes the
// file before it returns, so the object it names may be created next. It
// is safe for concurrent use.
type Ledger struct {
	dir string
	mu  sync.Mutex
	rec Record
}

// Open starts a record for this run in dir, replacing any earlier one
// (whose objects the caller has removed).
func Open(dir, backend string, now time.Time) (*Ledger, error) {
	l := &Ledger{dir: dir, rec: Record{PID: os.Getpid(), Started: now, Backend: backend}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory for the selftest's scratch record: %w", err)
	}
	return l, l.save()
}

// SetAnchor records the scratch anchor.
func (l *Ledger) SetAnchor(anchor string) error {
	return l.update(func(r *Record) { r.Anchor = anchor })
}

// AddPipe records scratch pipe n.
func (l *Ledger) AddPipe(n int) error {
	return l.update(func(r *Record) {
		if !slices.Contains(r.Pipes, n) {
			r.Pipes = append(r.Pipes, n)
		}
	})
}

// AddToken records a pf enable token the run holds.
func (l *Ledger) AddToken(tok string) error {
	return l.update(func(r *Record) {
		if !slices.Contains(r.Tokens, tok) {
			r.Tokens = append(r.Tokens, tok)
		}
	})
}

// SetNetns records the scratch network namespace.
func (l *Ledger) SetNetns(name string) error {
	return l.update(func(r *Record) { r.Netns = name })
}

// Record returns a copy of the record.
func (l *Ledger) Record() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rec
	r.Pipes = slices.Clone(r.Pipes)
	r.Tokens = slices.Clone(r.Tokens)
	return r
}

// Close removes the record once its objects are gone.
func (l *Ledger) Close() error { return Remove(l.dir) }

func (l *Ledger) update(f func(r *Record)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.rec)
	return l.save()
}

func (l *Ledger) save() error {
	b, err := json.MarshalIndent(l.rec, "", "  ")
	if err != nil {
		return err
	}
	if err := safefile.WriteAtomic(Path(l.dir), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the selftest's scratch record: %w", err)
	}
	return nil
}
