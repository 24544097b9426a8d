// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/shape"
)

// The identities macake owns. They are chosen to be unlikely in hand-made
// or other tools' setups: 0x4d4b is "MK" in ASCII, and auto-assigned tc
// handles start at 8001:.
const (
	// RootHandle is the major handle of macake's root qdisc on a shaped
	// interface and on its IFB ("4d4b:").
	RootHandle uint32 = 0x4d4b << 16
	// ClassHandle is the htb class that carries the rate ("4d4b:1").
	ClassHandle uint32 = RootHandle | 1
	// BypassClass is, under a prio root, the band the exempt probes take
	// ("4d4b:1", band 0): prio serves it ahead of CakeClass.
	BypassClass uint32 = RootHandle | 1
	// CakeClass is, under a prio root, the band CAKE shapes ("4d4b:2").
	CakeClass uint32 = RootHandle | 2
	// LeafHandle is the shaper's leaf qdisc ("4d4c:"): the bfifo under
	// ClassHandle, or CAKE under CakeClass.
	LeafHandle uint32 = 0x4d4c << 16
	// IngressHandle is the kernel's fixed handle of ingress and clsact
	// qdiscs ("ffff:").
	IngressHandle uint32 = 0xffff << 16

	// ExemptIPv4Pref and ExemptIPv6Pref are the filter priorities of the
	// probe exemptions; they sort before RedirectPref so exempt replies are
	// let through before the redirect to the IFB is considered.
	ExemptIPv4Pref = 0x4d49
	ExemptIPv6Pref = 0x4d4a
	// RedirectPref is the priority of the ingress redirect to the IFB.
	RedirectPref = 0x4d4b

	// KindShaper is the plan.Op kind of a root qdisc that shapes one
	// direction.
	KindShaper = "shaper"
	// KindIngress is the plan.Op kind of the ingress qdisc macake adds to
	// hang its download redirect on.
	KindIngress = "ingress"

	// IFBPrefix starts the name of every IFB device macake creates.
	IFBPrefix = shape.OwnIFBPrefix
	// maxIfName is IFNAMSIZ-1, the longest Linux interface name.
	maxIfName = shape.MaxInterfaceName
	// prioBands is the number of bands of the prio root under which CAKE
	// shapes; prioShapedBand is the band (0-based) every packet goes to
	// unless a filter picks another: CAKE's.
	prioBands      = 2
	prioShapedBand = 1
	// htbQuantum is the htb class quantum: with a single class it has no
	// effect on scheduling, and setting it stops the kernel from warning
	// "quantum of class is big" on every rate change at high rates.
	htbQuantum = 1514
)

// IFBName returns the name of the IFB device for a link's slot, e.g.
// "ifb-macake0". It fits IFNAMSIZ for every slot up to 99999.
func IFBName(slot int) string { return IFBPrefix + strconv.Itoa(slot) }

var ifbNameRE = lazyregexp.New(`^ifb-macake(0|[1-9][0-9]{0,4})$`)

// IFBSlot reports whether name is one of macake's IFB names, and its slot.
func IFBSlot(name string) (int, bool) {
	m := ifbNameRE.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// FormatHandle renders a handle the way tc prints it: "4d4b:", "4d4b:1",
// ":1", "root" for the root pseudo-handle.
func FormatHandle(h uint32) string {
	switch {
	case h == 0xffffffff:
		return "root"
	case h>>16 == 0:
		return fmt.Sprintf(":%x", h&0xffff)
	case h&0xffff == 0:
		return fmt.Sprintf("%x:", h>>16)
	}
	return fmt.Sprintf("%x:%x", h>>16, h&0xffff)
}

// ParseHandle reads a handle as tc prints it ("4d4b:", "4d4b:1", ":1",
// "0:", "root", "none") or as newer iproute2 prints leaf IDs ("0x4d4c").
func ParseHandle(s string) (uint32, error) {
	switch s {
	case "root":
		return 0xffffffff, nil
	case "none":
		return 0, nil
	}
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		v, err := strconv.ParseUint(s[2:], 16, 16)
		if err != nil {
			return 0, fmt.Errorf("bad handle %q", s)
		}
		return uint32(v) << 16, nil
	}
	maj, min, found := strings.Cut(s, ":")
	if !found {
		v, err := strconv.ParseUint(s, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("bad handle %q", s)
		}
		return uint32(v) << 16, nil
	}
	var h uint32
	if maj != "" {
		v, err := strconv.ParseUint(maj, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("bad handle %q", s)
		}
		h = uint32(v) << 16
	}
	if min != "" {
		v, err := strconv.ParseUint(min, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("bad handle %q", s)
		}
		h |= uint32(v)
	}
	return h, nil
}
