// SPDX-License-Identifier: Apache-2.0

// Package shape is the backend-neutral desired state: which links are active
// on which interfaces, at which rates, with which probe exemptions. The
// reconciler computes it from the policy files, the link facts and the
// controllers' current rates; a backend (pfdn on macOS, tc on Linux) turns it
// into its own objects, diffs them against the live system and applies the
// difference.
//
// It is also the one home of the rate arithmetic all of them share
// (rate.go): rounding to whole kbit/s, the overhead/MPU/ATM compensation
// of a pipe rate, and the human form of a rate.
package shape

import (
	"fmt"
	"reflect"
	"sort"
	"time"
)

// Direction is one of the two independently shaped directions of a link.
type Direction int

// The two directions. Upload is egress on the interface, Download is ingress.
const (
	Upload Direction = iota
	Download
)

// String returns "upload" or "download".
func (d Direction) String() string {
	switch d {
	case Upload:
		return "upload"
	case Download:
		return "download"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Directions lists both directions in the order backends create them.
var Directions = [2]Direction{Upload, Download}

// Pipe is the desired shaper for one direction: a rate and a byte-limited
// drop-tail queue (what a dummynet pipe is, and what htb+bfifo mirrors).
type Pipe struct {
	// RateBits is the shaping rate in bit/s, > 0.
	RateBits int64
	// QueueBytes is the queue limit in bytes, > 0.
	QueueBytes int64
	// Compensation, when set, says that RateBits stands for a higher rate
	// on the wire (the policy's, or the last known-good one) and why, so
	// that a plan can show both. It is an explanation, not a setting: Same
	// ignores it, and a pipe set from a controller decision has none.
	Compensation Compensation
}

// Shaped reports whether p shapes its direction: a Pipe with neither a
// rate nor a queue stands for a direction left unshaped (its mode is
// "off"). A pipe with either is shaped, and its values are checked.
func (p Pipe) Shaped() bool { return p.RateBits != 0 || p.QueueBytes != 0 }

// DirectionOff is why a backend removes what shaped direction d of a link
// that stays but no longer shapes d (its mode is "off"), in its plan.
func DirectionOff(d Direction) string { return "the link no longer shapes its " + d.String() }

// Same reports whether p and q are the same setting: the same rate and
// queue, whatever their explanations.
func (p Pipe) Same(q Pipe) bool { return p.RateBits == q.RateBits && p.QueueBytes == q.QueueBytes }

// SameSettings reports whether a and b ask for the same links with the same
// settings, whatever their pipes' explanations (Pipe.Compensation).
func SameSettings(a, b []Link) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.Upload.Same(y.Upload) || !x.Download.Same(y.Download) {
			return false
		}
		x.Upload, x.Download, y.Upload, y.Download = Pipe{}, Pipe{}, Pipe{}, Pipe{}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// Link is one active link: a policy matched to an interface that is up.
type Link struct {
	// Name is the policy name (the file stem in links.d).
	Name string
	// Interface is the shaped interface, e.g. "en0".
	Interface string
	// Slot is the link's stable allocation index (0-based) from the state
	// file. Backends derive object identities from it (pfdn: pipes
	// 48001+2*Slot for upload and 48002+2*Slot for download), so adding,
	// removing or renaming another link never renumbers this one.
	Slot int
	// Upload and Download are the desired shapers. A zero Pipe leaves its
	// direction unshaped (Pipe.Shaped): the backend installs nothing for
	// it and removes what it had; at least one of the two is shaped.
	Upload, Download Pipe
	// Reflectors are the controller's probe targets; their probes (ICMP,
	// or TCP or UDP to their port) are exempt from shaping so the
	// controller sees the bottleneck's queue, not ours.
	Reflectors []Reflector
	// Cake holds CAKE-only options for backends that have CAKE; nil when
	// the policy sets none.
	Cake *Cake
}

// Pipe returns the desired shaper of direction d.
func (l Link) Pipe(d Direction) Pipe {
	if d == Upload {
		return l.Upload
	}
	return l.Download
}

// WithPipe returns l with direction d's shaper replaced.
func (l Link) WithPipe(d Direction, p Pipe) Link {
	if d == Upload {
		l.Upload = p
	} else {
		l.Download = p
	}
	return l
}

// Cake is the set of CAKE options a policy may ask for (Linux with sch_cake
// only; dummynet cannot do any of them). Its zero value is CAKE's own
// defaults, with no per-packet compensation.
type Cake struct {
	Diffserv       string // "diffserv3", "diffserv4", "diffserv8", "besteffort", "precedence"; "" = CAKE default
	EgressIsolate  string // e.g. "dual-srchost", "triple-isolate"; "" = CAKE default
	IngressIsolate string // e.g. "dual-dsthost"
	NAT            bool
	ACKFilter      bool // upload only
	// Wash clears DSCP marks as packets leave CAKE, in both directions.
	Wash bool
	// NoSplitGSO turns off CAKE's splitting of GSO super-packets.
	NoSplitGSO bool
	// RTT is CAKE's rtt (its interval; target is a twentieth of it); 0 =
	// CAKE's 100 ms.
	RTT time.Duration
	// MemLimit caps CAKE's queue memory in bytes; 0 = CAKE's own limit.
	MemLimit int64
	// LinkLayer is the cell framing CAKE compensates: "atm" (53-byte
	// cells of 48), "ptm" (64b/65b); "" = none.
	LinkLayer string
	Overhead  int // bytes per packet, 0-256
	MPU       int
}

// State is the whole desired state: every active link, at most one per
// interface, sorted by name.
type State struct {
	Links []Link
	// Unshaped lists the links that hold a slot (so may have been shaped
	// before) but are not in Links, each with why. It installs nothing:
	// backends use it to name the link whose leftovers they remove and to
	// give the true reason (its network changed, its interface is down,
	// its mode is "off", its policy file is gone). Optional; sorted by
	// name.
	Unshaped []Unshaped `json:",omitempty"`
}

// Unshaped is a link that installs nothing now, and why.
type Unshaped struct {
	// Name is the policy name.
	Name string
	// Interface is the policy's interface; "" when the policy is gone.
	Interface string
	// Slot is the slot the link held, so a backend can tell which of its
	// objects were the link's.
	Slot int
	// Reason says why in one phrase, e.g. "interface en0 is down".
	Reason string
}

// UnshapedLink returns why the link named name is not shaped, if State
// records it and the link is not in Links.
func (s State) UnshapedLink(name string) (Unshaped, bool) {
	if _, shaped := s.Link(name); shaped {
		return Unshaped{}, false
	}
	for _, u := range s.Unshaped {
		if u.Name == name {
			return u, true
		}
	}
	return Unshaped{}, false
}

// UnshapedSlot returns the unshaped link that held slot n, if any.
func (s State) UnshapedSlot(n int) (Unshaped, bool) {
	for _, u := range s.Unshaped {
		if _, shaped := s.Link(u.Name); u.Slot == n && !shaped {
			return u, true
		}
	}
	return Unshaped{}, false
}

// Sort orders the links by name, the order plans and listings use.
func (s *State) Sort() {
	sort.Slice(s.Links, func(i, j int) bool { return s.Links[i].Name < s.Links[j].Name })
}

// Link returns the active link with the given name.
func (s State) Link(name string) (Link, bool) {
	for _, l := range s.Links {
		if l.Name == name {
			return l, true
		}
	}
	return Link{}, false
}
