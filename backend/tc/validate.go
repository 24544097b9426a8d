// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"fmt"
	"strings"
	"time"

	"github.com/macake/macake/shape"
)

// Limits of what the backend renders.
const (
	// MaxSlot keeps IFB names within IFNAMSIZ ("ifb-macake99999").
	MaxSlot = 99999
	// MaxRateBits is macake's own bound (shape.MaxRateBits): htb and
	// cake take any rate below it.
	MaxRateBits = shape.MaxRateBits
	// MaxQueueBytes is bfifo's 32-bit limit (and CAKE's memlimit's).
	MaxQueueBytes = 1<<32 - 1
	// maxCakeRTT is the longest rtt CAKE's 32-bit µs field holds.
	maxCakeRTT = (1<<32 - 1) * time.Microsecond
)

// Limits are tc's, as backend.Info reports them.
var Limits = shape.Limits{Shaper: "tc", MaxRateBits: MaxRateBits, MaxQueueBytes: MaxQueueBytes, FitsQueue: true}

var (
	cakeDiffservModes = []string{"diffserv3", "diffserv4", "diffserv8", "besteffort", "precedence"}
	cakeFlowModes     = []string{"triple-isolate", "dual-srchost", "dual-dsthost", "hosts", "srchost", "dsthost", "flows", "flowblind"}
)

// ValidateState checks everything ValidateLink checks, and that links'
// names, interfaces and slots are unique.
func ValidateState(s shape.State) error {
	names, ifaces, slots := map[string]bool{}, map[string]string{}, map[int]string{}
	for _, l := range s.Links {
		if err := ValidateLink(l); err != nil {
			return err
		}
		if names[l.Name] {
			return fmt.Errorf("link %q: listed twice", l.Name)
		}
		names[l.Name] = true
		if other, dup := ifaces[l.Interface]; dup {
			return fmt.Errorf("links %q and %q both shape interface %s; only one link per interface can be active", other, l.Name, l.Interface)
		}
		ifaces[l.Interface] = l.Name
		if other, dup := slots[l.Slot]; dup {
			return fmt.Errorf("links %q and %q have the same slot %d; slots come from the state file and must be unique", other, l.Name, l.Slot)
		}
		slots[l.Slot] = l.Name
	}
	return nil
}

// uniqueNames checks that no link is listed twice: a state that is not a
// set of links, unlike a link that cannot be rendered, which Diff skips.
func uniqueNames(s shape.State) error {
	names := map[string]bool{}
	for _, l := range s.Links {
		if names[l.Name] {
			return fmt.Errorf("link %q: listed twice", l.Name)
		}
		names[l.Name] = true
	}
	return nil
}

// ValidateLink checks that a link can be rendered as tc objects.
func ValidateLink(l shape.Link) error {
	if l.Name == "" {
		return fmt.Errorf("a link has no name")
	}
	if err := checkLink(l); err != nil {
		return fmt.Errorf("link %q: %w", l.Name, err)
	}
	return nil
}

// checkLink is ValidateLink without the link's name in the message.
func checkLink(l shape.Link) error {
	bad := fmt.Errorf
	if err := shape.CheckInterfaceName(l.Interface); err != nil {
		return bad("interface: %v", err)
	}
	if l.Slot < 0 || l.Slot > MaxSlot {
		return bad("slot %d is outside 0-%d", l.Slot, MaxSlot)
	}
	if !l.Upload.Shaped() && !l.Download.Shaped() {
		return bad("it shapes neither direction")
	}
	for _, d := range shape.Directions {
		p := l.Pipe(d)
		if !p.Shaped() {
			continue // a direction the link does not shape
		}
		if p.RateBits <= 0 || p.RateBits > MaxRateBits {
			return bad("%s rate %d bit/s is outside 1 bit/s-%s", d, p.RateBits, shape.FormatRate(MaxRateBits))
		}
		if p.QueueBytes <= 0 || p.QueueBytes > MaxQueueBytes {
			return bad("%s queue %d bytes is outside 1-%d", d, p.QueueBytes, int64(MaxQueueBytes))
		}
	}
	for _, r := range l.Reflectors {
		if !r.Addr.IsValid() || r.Addr.IsUnspecified() {
			return bad("reflector %q is not a usable address", r.Addr)
		}
		if r.Kind.HasPort() != (r.Port != 0) {
			return bad("reflector %s: a %s probe needs a port, and only TCP and UDP have one", r, r.Kind)
		}
	}
	if c := l.Cake; c != nil {
		if c.Diffserv != "" && !oneOf(c.Diffserv, cakeDiffservModes) {
			return bad("cake diffserv %q is not one of %s", c.Diffserv, strings.Join(cakeDiffservModes, ", "))
		}
		for _, iso := range []string{c.EgressIsolate, c.IngressIsolate} {
			if iso != "" && !oneOf(iso, cakeFlowModes) {
				return bad("cake isolation %q is not one of %s", iso, strings.Join(cakeFlowModes, ", "))
			}
		}
		if c.Overhead < 0 || c.Overhead > 256 {
			return bad("overhead %d is outside 0-256 bytes", c.Overhead)
		}
		if c.MPU < 0 || c.MPU > 256 {
			return bad("mpu %d is outside 0-256 bytes", c.MPU)
		}
		if c.RTT < 0 || c.RTT > maxCakeRTT || (c.RTT > 0 && c.RTT < time.Microsecond) {
			return bad("cake rtt %s is outside 1µs-%s", c.RTT, maxCakeRTT)
		}
		if c.MemLimit < 0 || c.MemLimit > MaxQueueBytes {
			return bad("cake memlimit %d bytes is outside 0-%d", c.MemLimit, int64(MaxQueueBytes))
		}
		if _, ok := cakeATM[cakeLinkLayer(c.LinkLayer)]; !ok {
			return bad("cake link layer %q is not one of atm, ptm or empty (none)", c.LinkLayer)
		}
	}
	return nil
}

func oneOf(s string, set []string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

// cakeOnlyOptions lists the options of c that only CAKE can apply.
// Overhead and MPU are not among them: htb compensates them too.
func cakeOnlyOptions(c *shape.Cake) []string {
	if c == nil {
		return nil
	}
	var lost []string
	if c.Diffserv != "" {
		lost = append(lost, c.Diffserv)
	}
	if c.EgressIsolate != "" {
		lost = append(lost, c.EgressIsolate+" isolation on upload")
	}
	if c.IngressIsolate != "" {
		lost = append(lost, c.IngressIsolate+" isolation on download")
	}
	if c.NAT {
		lost = append(lost, "nat")
	}
	if c.ACKFilter {
		lost = append(lost, "ack-filter")
	}
	if c.Wash {
		lost = append(lost, "wash")
	}
	if c.NoSplitGSO {
		lost = append(lost, "no-split-gso")
	}
	if c.RTT != 0 {
		lost = append(lost, "rtt "+c.RTT.String())
	}
	if c.MemLimit != 0 {
		lost = append(lost, "memlimit "+shape.FormatBytes(c.MemLimit))
	}
	if c.LinkLayer != "" {
		lost = append(lost, c.LinkLayer+" cell framing")
	}
	return lost
}

// cakeLinkLayer is CAKE's word for a shape.Cake link layer ("" is noatm).
func cakeLinkLayer(l string) string {
	if l == "" {
		return cakeDefaultLinkLayer
	}
	return l
}
