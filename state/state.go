// SPDX-License-Identifier: Apache-2.0

// Package state reads and writes macake's machine-written state file
// (/var/db/macake/state.json): the pf enable token, the stable slot of each
// link (from which pipe numbers derive), and each link's measured profile.
// Writes are atomic (temp file, fsync, rename, fsync of the directory), so a
// crash leaves either the old or the new file, never a torn one. A corrupt
// file is reported and replaced by an empty state, never a crash: the pf
// token is recovered from it when that field still reads, and the rest can
// be rebuilt from the live system or measured again. The state directory and
// file decide what macake removes and which pf reference it releases, so a
// root run refuses them unless root owns them and nobody else can write
// them (CheckOwnership).
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/macake/macake/internal/fileowner"
	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/internal/safefile"
	"github.com/macake/macake/shape"
)

// FileName is the state file's name inside the state directory.
const FileName = "state.json"

// maxSize bounds what Load reads: a state file holds a few kilobytes (a
// profile per network), and anything much larger is not one.
const maxSize = 16 << 20

// FormatVersion is written into every file; a file with a higher major
// version is refused rather than misread.
const FormatVersion = 1

// State is the content of the state file.
type State struct {
	Version int `json:"version"`
	// PFToken is the pf enable reference macake holds (from `pfctl -E`),
	// released with `pfctl -X` on down. Empty when none is held.
	PFToken string `json:"pf_token,omitempty"`
	// PFEnablePending is set just before macake runs `pfctl -E` and
	// cleared when the token is saved: if macake dies in between, the
	// next run finds the token pf took (see pfdn.EnableIntent) instead of
	// leaking the reference.
	PFEnablePending *PFEnablePending `json:"pf_enable_pending,omitempty"`
	// Slots maps link name to its stable slot (see shape.Link.Slot).
	Slots map[string]int `json:"slots,omitempty"`
	// Profiles maps a link identity key (see ProfileKey) to what was
	// measured or learned on that network.
	Profiles map[string]Profile `json:"profiles,omitempty"`
	// TCOwnedRoots lists the interfaces whose root qdisc the Linux backend
	// put there and has not removed since, sorted. It is what lets macake
	// tell "someone replaced macake's shaper" (repaired) from "another
	// tool's qdisc was there first" (never touched).
	TCOwnedRoots []string `json:"tc_owned_roots,omitempty"`
	// TCOwnedHooks lists the interfaces whose ingress qdisc the Linux
	// backend added and has not removed since, sorted: only those are
	// deleted on down, since an empty ingress qdisc that was there first
	// looks the same.
	TCOwnedHooks []string `json:"tc_owned_hooks,omitempty"`
	// Pauses are the pauses of the shaping a running watch holds, by link
	// name (AllLinks: every link), so that a pause survives a restart of
	// watch until it ends.
	Pauses map[string]Pause `json:"pauses,omitempty"`
}

// AllLinks is the Pauses key of a pause of every link: no link's name
// (a name starts with a letter or digit).
const AllLinks = "*"

// Pause is a lease that keeps macake's shaping off from Since until
// Until: `macake pause`, the status page's buttons, `macake bench
// --compare`. It ends by itself; Until is wall-clock time, so a reboot
// keeps it no longer than its end.
type Pause struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// By says who asked.
	By string `json:"by,omitempty"`
}

// InForce reports whether the pause holds at now. A clock that reads
// before the pause began (set back, or a machine that booted without the
// right time) ends it: that clock cannot say how long it has run, and a
// pause must never outlast its length; shaping is the safe side.
func (p Pause) InForce(now time.Time) bool {
	return !now.Before(p.Since) && now.Before(p.Until)
}

// PFEnablePending is an interrupted `pfctl -E`: when macake was about to
// run it, and the pf tokens held just before.
type PFEnablePending struct {
	At     time.Time `json:"at"`
	Before []string  `json:"tokens_before,omitempty"`
}

// Profile is what macake knows about one network: measured capacity, idle
// baseline and the last rates that were known good (no bufferbloat).
type Profile struct {
	Link             string `json:"link"`
	DownloadCapacity int64  `json:"download_capacity_bits_per_second,omitempty"`
	UploadCapacity   int64  `json:"upload_capacity_bits_per_second,omitempty"`
	// PeakDownload and PeakUpload are the highest capacities measured on
	// this network, which max = "auto" follows (the capacities above are
	// the latest measurement, which "auto" base rates follow). Files
	// written before they existed lack them: see Peaks.
	PeakDownload int64         `json:"peak_download_capacity_bits_per_second,omitempty"`
	PeakUpload   int64         `json:"peak_upload_capacity_bits_per_second,omitempty"`
	IdleRTT      time.Duration `json:"idle_rtt_ns,omitempty"`
	GoodDownload int64         `json:"good_download_bits_per_second,omitempty"`
	GoodUpload   int64         `json:"good_upload_bits_per_second,omitempty"`
	MeasuredAt   time.Time     `json:"measured_at,omitzero"`
	UpdatedAt    time.Time     `json:"updated_at,omitzero"`
	// ProbeKind is how the policy's "auto:" reflectors are probed on this
	// network: "tcp" when measure found that TCP handshakes see the
	// bufferbloat and ICMP does not (the network prioritises or polices
	// ICMP), "icmp" when ICMP saw it too. Empty until a measurement
	// compared the two; auto reflectors then use ICMP.
	ProbeKind string `json:"probe_kind,omitempty"`
}

// Peaks returns the highest download and upload capacities measured on
// the network. A profile written before peaks were kept has its latest
// measurement as its peak.
func (p Profile) Peaks() (download, upload int64) {
	return max(p.PeakDownload, p.DownloadCapacity), max(p.PeakUpload, p.UploadCapacity)
}

// Capacity returns direction d's latest and peak measured capacity and
// its last known-good rate, in bit/s (0 where unknown).
func (p Profile) Capacity(d shape.Direction) (latest, peak, good int64) {
	down, up := p.Peaks()
	return shape.ByDirection[int64]{Upload: p.UploadCapacity, Download: p.DownloadCapacity}.Of(d),
		shape.ByDirection[int64]{Upload: up, Download: down}.Of(d),
		shape.ByDirection[int64]{Upload: p.GoodUpload, Download: p.GoodDownload}.Of(d)
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

// MeasuredLink reports whether link has a measured capacity on any
// network (a profile under one of its ProfileKeys).
func (s *State) MeasuredLink(link string) bool {
	for key, p := range s.Profiles {
		if (key == link || strings.HasPrefix(key, link+"@")) && (p.DownloadCapacity > 0 || p.UploadCapacity > 0) {
			return true
		}
	}
	return false
}

// ErrCorrupt marks a state file that exists but cannot be read as state.
var ErrCorrupt = errors.New("state file is corrupt")

// Path returns the state file path inside dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Load reads the state in dir. A missing file gives an empty state and no
// error. A corrupt file gives an error wrapping ErrCorrupt, which callers
// report before carrying on, and a state that is empty but for the pf
// token when the file's "pf_token" field still reads: without it macake's
// pf enable reference could never be released. Callers that will write
// the state should move the corrupt file aside first (SetAside), so the
// evidence survives the rewrite.
func Load(dir string) (*State, error) {
	s := &State{Version: FormatVersion}
	b, _, err := safefile.Read(Path(dir), maxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("reading state: %w", err)
	}
	var got State
	if err := json.Unmarshal(b, &got); err != nil {
		return salvage(s, b), fmt.Errorf("%w: %s: %v (%s)", ErrCorrupt, Path(dir), err, salvaged(s))
	}
	if got.Version > FormatVersion {
		return s, fmt.Errorf("%w: %s has format version %d, this macake understands %d; upgrade macake", ErrCorrupt, Path(dir), got.Version, FormatVersion)
	}
	got.Version = FormatVersion
	return &got, nil
}

// tokenField finds the pf token in a file that is not valid JSON as a
// whole: pfctl -E tokens are decimal numbers, which rules out a partial
// match of a torn value being mistaken for a whole one only when the
// closing quote is there too.
var tokenField = lazyregexp.New(`"pf_token"\s*:\s*"([0-9]+)"`)

// salvage copies the pf token of a corrupt file's bytes b into s, when
// exactly one token field reads.
func salvage(s *State, b []byte) *State {
	if m := tokenField.FindAllSubmatch(b, -1); len(m) == 1 {
		s.PFToken = string(m[0][1])
	}
	return s
}

// salvaged says what a corrupt file still gave.
func salvaged(s *State) string {
	if s.PFToken != "" {
		return fmt.Sprintf("the pf token %s was recovered from it; slots are rebuilt from the live system", s.PFToken)
	}
	return "it will be rebuilt from the live system; a pf reference it recorded cannot be released by macake (see `sudo pfctl -s References`)"
}

// CorruptSuffix is appended to a corrupt state file's name by SetAside.
const CorruptSuffix = ".corrupt"

// SetAside copies a corrupt state file to FileName+CorruptSuffix in the
// same directory (replacing an older copy), so that writing the rebuilt
// state does not destroy what a person may want to look at. It copies
// rather than moves: until the rebuilt state is written, the corrupt file
// stays where every run finds it, and what Load salvages from it (the pf
// token) is salvaged again by a run that stops before it saves. It returns
// the copy's path.
func SetAside(dir string) (string, error) {
	to := Path(dir) + CorruptSuffix
	b, err := os.ReadFile(Path(dir))
	if err != nil {
		return "", fmt.Errorf("copying the corrupt state file aside: %w", err)
	}
	if err := safefile.WriteAtomic(to, b, 0o644); err != nil {
		return "", fmt.Errorf("copying the corrupt state file aside: %w", err)
	}
	return to, nil
}

// OwnershipError says that the state directory or file could be changed by
// someone other than root. Whoever can write the state file decides which
// pipes macake deletes and which pf reference it releases, so a root run
// refuses it rather than act on it.
type OwnershipError struct {
	// Path is the offending directory or file.
	Path string
	// Problem says what is wrong, e.g. "owned by uid 501, not root".
	Problem string
	// Fix is the command that makes it safe.
	Fix string
}

// Error names the path, the problem and the fix.
func (e *OwnershipError) Error() string {
	return fmt.Sprintf("refusing to use the state %s: it is %s, so another user could make macake delete other tools' pipes or release their pf reference; fix: %s",
		e.Path, e.Problem, e.Fix)
}

// CheckOwnership returns an *OwnershipError when dir, or the state file
// in it, is not owned by root or is writable by group or others (as the
// config directory must not be, and as ssh requires of its keys). A dir or
// file that does not exist yet passes: macake creates it as root, 0755 and
// 0644. Only root runs call it; a run by another user cannot change pf
// anyway.
func CheckOwnership(dir string) error {
	if d, problem := fileowner.UnsafeAncestor(dir); d != "" {
		return &OwnershipError{Path: d, Problem: problem + ", and it lies above the state directory " + dir,
			Fix: fmt.Sprintf("sudo chown %s %s && sudo chmod go-w %s", rootOwner(), d, d)}
	}
	for _, path := range []string{dir, Path(dir)} {
		info, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && path == dir && info.Mode().Type() == fs.ModeSymlink {
			// A state_dir that is a link (as /var is on macOS, one
			// level up) is judged by the directory it leads to.
			info, err = os.Stat(path)
		}
		if err != nil {
			return fmt.Errorf("checking the state %s: %w", path, err)
		}
		if path == dir {
			if !info.IsDir() {
				return &OwnershipError{Path: path, Problem: "not a directory", Fix: "remove it, or set state_dir to a directory"}
			}
		} else if !info.Mode().IsRegular() {
			return &OwnershipError{Path: path, Problem: "not a regular file (" + info.Mode().Type().String() + ")", Fix: "sudo rm " + path}
		}
		if uid, _, ok := fileowner.Of(info); ok && uid != 0 {
			return &OwnershipError{Path: path, Problem: fmt.Sprintf("owned by uid %d, not root", uid), Fix: fmt.Sprintf("sudo chown %s %s && sudo chmod go-w %s", rootOwner(), path, path)}
		}
		if perm := info.Mode().Perm(); perm&0o022 != 0 {
			return &OwnershipError{Path: path, Problem: fmt.Sprintf("writable by group or others (mode %04o)", perm), Fix: "sudo chmod go-w " + path}
		}
	}
	return nil
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
	return safefile.WriteAtomic(Path(dir), append(b, '\n'), 0o644)
}

// Slot returns the slot of link, allocating the lowest free one (at most
// max-1) when it has none. A slot is free when no link holds it and it is
// not in blocked: the backend's objects for it exist live but are not
// provably macake's (another tool's pipe in macake's range), and a new link
// must never take those over. ok is false when no slot is free.
func (s *State) Slot(link string, max int, blocked map[int]bool) (slot int, ok bool) {
	if n, found := s.Slots[link]; found {
		return n, true
	}
	used := make(map[int]bool, len(s.Slots))
	for _, n := range s.Slots {
		used[n] = true
	}
	for n := 0; n < max; n++ {
		if !used[n] && !blocked[n] {
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
// both capacities, the idle RTT when one was measured, and when. The peak
// capacities rise to the measurement when it is higher and never fall: a
// measurement taken while the link was busy or poor must not cap a
// max = "auto". What the controller learned there (the known-good rates)
// stays; peaks in m are ignored. The daemon and
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
	down, up := p.Peaks()
	p.PeakDownload, p.PeakUpload = max(down, m.DownloadCapacity), max(up, m.UploadCapacity)
	p.DownloadCapacity, p.UploadCapacity = m.DownloadCapacity, m.UploadCapacity
	if m.IdleRTT > 0 {
		p.IdleRTT = m.IdleRTT
	}
	p.MeasuredAt, p.UpdatedAt = m.MeasuredAt, m.MeasuredAt
	if m.ProbeKind != "" {
		// A measurement that compared nothing (no auto reflectors, or
		// --reflector) keeps the last comparison's choice.
		p.ProbeKind = m.ProbeKind
	}
	s.Profiles[key] = p
}

// rootOwner is the owner and group to give the state: root's primary group
// is wheel on macOS and root on Linux.
func rootOwner() string {
	if runtime.GOOS == "darwin" {
		return "root:wheel"
	}
	return "root:root"
}

// Clone returns a deep copy of s (nil for nil).
func (s *State) Clone() *State {
	if s == nil {
		return nil
	}
	c := *s
	if p := s.PFEnablePending; p != nil {
		c.PFEnablePending = &PFEnablePending{At: p.At, Before: slices.Clone(p.Before)}
	}
	c.Slots = maps.Clone(s.Slots)
	c.Profiles = maps.Clone(s.Profiles)
	c.TCOwnedRoots = slices.Clone(s.TCOwnedRoots)
	c.TCOwnedHooks = slices.Clone(s.TCOwnedHooks)
	c.Pauses = maps.Clone(s.Pauses)
	return &c
}
