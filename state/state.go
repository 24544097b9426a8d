// SPDX-License-Identifier: Apache-2.0

// Package state reads and writes macake's machine-written state file
// (/var/db/macake/state.json): the pf enable token, the stable slot of each
// link (from which pipe numbers derive), and each link's measured profile.
// Writes are atomic (temp file, fsync, rename, fsync of the directory), so a
// crash leaves either the old or the new file, never a torn one. A corrupt
// file is reported and replaced by an empty state, never a crash: everything
// in it can be rebuilt from the live system or measured again.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// FileName is the state file's name inside the state directory.
const FileName = "state.json"

// FormatVersion is written into every file; a file with a higher major
// version is refused rather than misread.
const FormatVersion = 1

// State is the content of the state file.
type State struct {
	Version int `json:"version"`
	// PFToken is the pf enable reference macake holds (from `pfctl -E`),
	// released with `pfctl -X` on down. Empty when none is held.
	PFToken string `json:"pf_token,omitempty"`
	// Slots maps link name to its stable slot (see shape.Link.Slot).
	Slots map[string]int `json:"slots,omitempty"`
	// Profiles maps a link identity key (see ProfileKey) to what was
	// measured or learned on that network.
	Profiles map[string]Profile `json:"profiles,omitempty"`
}

// Profile is what macake knows about one network: measured capacity, idle
// baseline and the last rates that were known good (no bufferbloat).
type Profile struct {
	Link             string        `json:"link"`
	DownloadCapacity int64         `json:"download_capacity_bits_per_second,omitempty"`
	UploadCapacity   int64         `json:"upload_capacity_bits_per_second,omitempty"`
	IdleRTT          time.Duration `json:"idle_rtt_ns,omitempty"`
	GoodDownload     int64         `json:"good_download_bits_per_second,omitempty"`
	GoodUpload       int64         `json:"good_upload_bits_per_second,omitempty"`
	MeasuredAt       time.Time     `json:"measured_at,omitzero"`
	UpdatedAt        time.Time     `json:"updated_at,omitzero"`
}

// ProfileKey is the identity of a network: the link's name plus, when
// known, the gateway's MAC address (the stable key; SSIDs are often hidden
// on modern macOS). The same policy on another network gets its own profile.
func ProfileKey(link, gatewayMAC string) string {
	if gatewayMAC == "" {
		return link
	}
	return link + "@" + gatewayMAC
}

// ErrCorrupt marks a state file that exists but cannot be read as state.
var ErrCorrupt = errors.New("state file is corrupt")

// Path returns the state file path inside dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Load reads the state in dir. A missing file gives an empty state and no
// error. A corrupt file gives an empty state and an error wrapping
// ErrCorrupt, which callers report and then carry on with the empty state.
func Load(dir string) (*State, error) {
	s := &State{Version: FormatVersion}
	b, err := os.ReadFile(Path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("reading state: %w", err)
	}
	var got State
	if err := json.Unmarshal(b, &got); err != nil {
		return s, fmt.Errorf("%w: %s: %v (it will be rebuilt from the live system)", ErrCorrupt, Path(dir), err)
	}
	if got.Version > FormatVersion {
		return s, fmt.Errorf("%w: %s has format version %d, this macake understands %d; upgrade macake", ErrCorrupt, Path(dir), got.Version, FormatVersion)
	}
	got.Version = FormatVersion
	return &got, nil
}

// Save writes s to dir atomically, creating dir (mode 0755) if needed.
func Save(dir string, s *State) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	s.Version = FormatVersion
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding state: %w", err)
	}
	return WriteFileAtomic(Path(dir), append(b, '\n'), 0o644)
}

// WriteFileAtomic writes data to path via a temporary file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync() // best effort: not every filesystem supports it
		d.Close()
	}
	return nil
}

// Slot returns the slot of link, allocating the lowest free one (at most
// max-1) when it has none. ok is false when every slot is taken.
func (s *State) Slot(link string, max int) (slot int, ok bool) {
	if n, found := s.Slots[link]; found {
		return n, true
	}
	used := make(map[int]bool, len(s.Slots))
	for _, n := range s.Slots {
		used[n] = true
	}
	for n := 0; n < max; n++ {
		if !used[n] {
			if s.Slots == nil {
				s.Slots = map[string]int{}
			}
			s.Slots[link] = n
			return n, true
		}
	}
	return 0, false
}

// ReleaseSlotsExcept frees the slots of every link not in keep, so a link
// removed from the config gives its pipe numbers back.
func (s *State) ReleaseSlotsExcept(keep map[string]bool) {
	for name := range s.Slots {
		if !keep[name] {
			delete(s.Slots, name)
		}
	}
}

// LinkNames returns the names of links that hold a slot, sorted.
func (s *State) LinkNames() []string {
	names := make([]string, 0, len(s.Slots))
	for n := range s.Slots {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RecordMeasurement stores what `macake measure` found on the network key:
// both capacities, the idle RTT when one was measured, and when. What the
// controller learned there (the known-good rates) stays. The daemon and
// measure itself both record through it, so a measurement means the same
// whoever writes it.
func (s *State) RecordMeasurement(key string, m Profile) {
	if s.Profiles == nil {
		s.Profiles = map[string]Profile{}
	}
	p := s.Profiles[key]
	if m.Link != "" {
		p.Link = m.Link
	}
	p.DownloadCapacity, p.UploadCapacity = m.DownloadCapacity, m.UploadCapacity
	if m.IdleRTT > 0 {
		p.IdleRTT = m.IdleRTT
	}
	p.MeasuredAt, p.UpdatedAt = m.MeasuredAt, m.MeasuredAt
	s.Profiles[key] = p
}
